"""The benchmark runner: resumable trials.jsonl, failures kept to their trials, Ray = pool, the report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchmarks.report import build_report
from benchmarks.runner import TRIALS_FILE, pending_trials, read_trials, run_plan, write_trials
from benchmarks.stats import bootstrap_ci, summarise, t_test_against_zero
from benchmarks.trials import Plan
from clevr_game.generate import generate_dataset
from clevr_game.text import default_word_vocabulary
from players.state.checkpoint import player_file_from, save_player_file
from players.state.features import ANSWERS
from players.state.models import build_model

REPO = Path(__file__).resolve().parents[1]
TINY_RN = {"width": 32, "word_width": 16, "question_width": 32, "g_layers": 2, "f_width": 32, "dropout": 0.0}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    generate_dataset(root / "items", 30, 1, seed=3, progress=False)
    torch.manual_seed(0)
    words = default_word_vocabulary()
    network = build_model("relation-network", TINY_RN, len(words), len(ANSWERS))
    save_player_file(root / "rn.pt", player_file_from(network, "relation-network", words, list(ANSWERS), {}))
    return root


def _plan(setup: Path, out: Path, players=("oracle",), seeds=2) -> Plan:
    return Plan(players=list(players), items=str(setup / "items"), sizes=[10], minigames=2, seeds=seeds,
                steps=256, out=str(out), num_envs=64, eval_samples=8, search_budget=20,
                adversary_weights=str(setup / "rn.pt"))


def _comparable(records: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f not in ("seconds", "run")} for k, r in records.items()}


def test_failing_player_fails_only_its_trials(setup, tmp_path):
    records = run_plan(_plan(setup, tmp_path, players=("oracle", "subprocess:false"), seeds=1), workers=1)
    assert len(records) == 4
    for trial, record in records.items():
        if trial.startswith("oracle"):
            assert "error" not in record and record["consistency"] == 0.0 and record["drop"] == 0.0
            assert record["clean_accuracy"] == 1.0
        else:
            assert "exited with code 1" in record["error"] and "\n" not in record["error"]
            assert record["player_errors"] == record["player_queries"] > 0
    build_report(tmp_path)
    assert "Failed trials" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("workers", [1, 2])
def test_no_trial_starts_after_the_time_limit(setup, tmp_path, workers):
    plan = _plan(setup, tmp_path, seeds=1)
    assert run_plan(plan, workers=workers, max_minutes=0) == {}
    assert read_trials(tmp_path) == {}  # the command's test below continues such a run


def test_the_benchmark_command_says_it_stopped_and_continues(setup, tmp_path, capsys):
    from clevr_game.cli import main

    command = ["benchmark", "--players", "oracle,blind", "--items", str(setup / "items"), "--sizes", "10",
               "--minigames", "1", "--seeds", "1", "--steps", "256", "--workers", "1", "--out", str(tmp_path),
               "--no-progress", "--adversary-weights", str(setup / "rn.pt"), "--gallery-preset", "schematic"]
    # A limit shorter than the mini-games' preparation: no trial may begin, on any machine.
    assert main([*command, "--max-minutes", "1e-6"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-3] == ("stopped at the --max-minutes limit (1e-06): 2 trial(s) not begun; "
                         "the same command continues the benchmark")
    assert lines[-2] == "trials: 2 finished: 0 failed: 0"
    assert main(command) == 0
    assert capsys.readouterr().out.strip().splitlines()[-2] == "trials: 2 finished: 2 failed: 0"
    # Every trial of the first adversary also asks its questions about other items' scenes: the blind baseline.
    for record in read_trials(tmp_path).values():
        own, blind = record["own_scene_accuracy"], record["blind_accuracy"]
        assert own["answered"] == blind["answered"] == 10 and own["errors"] == 0
        if record["player"] == "oracle":
            assert own["value"] == record["clean_accuracy"] == 1.0 and blind["value"] < 1.0
        else:  # a player that reads only the question answers the same about any scene
            assert own["correct"] == blind["correct"]
        assert blind["low"] <= blind["value"] <= blind["high"]
    floor = {row["player"]: row for row in json.loads((tmp_path / "table2.json").read_text())["blind_floor"]}
    assert floor["blind"]["from_scene"] == 0.0 and floor["oracle"]["from_scene"] > 0
    assert floor["oracle"]["own"]["value"] == 1.0 and floor["oracle"]["items"] == 10
    report = (tmp_path / "report.md").read_text()
    assert "## Accuracy and its floor" in report and "| blind | 1 | 10 |" in report


def test_a_minigame_on_one_scene_records_why_it_has_no_blind_baseline(tmp_path):
    from benchmarks.runner import prepare
    from benchmarks.table2 import blind_floor
    from benchmarks.trials import _clean_and_blind

    generate_dataset(tmp_path / "items", 1, 12, seed=5, progress=False)  # twelve questions about one scene
    plan = Plan(players=["oracle"], items=str(tmp_path / "items"), sizes=[10], minigames=1, seeds=1, steps=64,
                out=str(tmp_path / "out"))
    prepare(plan)
    record = _clean_and_blind(plan.trials()[0])
    assert record == {"blind_accuracy": None, "blind_skipped": "every item of the mini-game is about one scene"}
    assert blind_floor([{"player": "oracle", "size": 10, "minigame": 0, "seed": 0, **record}]) == []


# A subprocess player that waits at a gate: while HOLD exists it writes its pid to ARRIVED and blocks;
# then it answers "yes" to every query. Its first start marks a known point of the benchmark.
GATE_PLAYER = """
import json, os, sys, time
hold, arrived = sys.argv[1], sys.argv[2]
if os.path.exists(hold):
    with open(arrived + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(arrived + ".tmp", arrived)
    while os.path.exists(hold):
        time.sleep(0.02)
try:
    for line in sys.stdin:
        print(json.dumps({"id": json.loads(line)["id"], "answer": "yes"}), flush=True)
except BrokenPipeError:
    pass
"""


def _wait_until(condition, what: str, timeout: float = 300.0) -> None:
    """Poll for an event; the timeout only bounds a test whose event never comes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout:g} s")
        time.sleep(0.02)


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_resume_after_a_kill_loses_and_duplicates_nothing(setup, tmp_path):
    # Trials run in plan order, one at a time: the two oracle trials, then the gated player's two.
    # The kill lands while the first gated trial waits at the gate, however fast the machine.
    gate, hold, arrived = tmp_path / "gate.py", tmp_path / "hold", tmp_path / "arrived"
    gate.write_text(GATE_PLAYER)
    hold.touch()
    results = tmp_path / "results"
    gated = f"subprocess:{sys.executable} {gate} {hold} {arrived}"
    command = [sys.executable, "-m", "clevr_game.cli", "benchmark", "--players", f"oracle,{gated}",
               "--items", str(setup / "items"), "--sizes", "10", "--minigames", "2", "--seeds", "1",
               "--steps", "256", "--workers", "1", "--out", str(results), "--no-progress",
               "--adversary-weights", str(setup / "rn.pt")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        _wait_until(lambda: arrived.exists() or process.poll() is not None, "the gated player to start")
        assert process.poll() is None, f"the benchmark ended before the gate: {process.stderr.read()!r}"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()
        hold.unlink()  # the gated player left behind reads its closed input and ends
    _wait_until(lambda: _ended(int(arrived.read_text())), "the orphaned gated player to end")

    before = read_trials(results)
    assert sorted((r["player"], r["minigame"]) for r in before.values()) == [("oracle", 0), ("oracle", 1)]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = (results / TRIALS_FILE).read_text().splitlines()
    ids = [json.loads(line)["trial"] for line in lines]
    assert len(ids) == len(set(ids)) == 4
    after = read_trials(results)
    assert all("error" not in record for record in after.values())
    for trial, record in before.items():
        assert after[trial] == record  # finished trials were skipped, not rerun
    printed = result.stdout.splitlines()
    ran = [line.split(" left  ", 1)[1].split(":")[0] for line in printed if line.startswith("[")]
    assert sorted(ran) == sorted(set(after) - set(before)), printed  # only the two gated trials ran again
    assert "trials: 4 finished: 4 failed: 0" in printed, printed


@pytest.mark.slow  # 11 s, most of it Ray starting its cluster
def test_ray_and_process_pool_give_identical_trials(setup, tmp_path):
    pytest.importorskip("ray")
    pool = run_plan(_plan(setup, tmp_path / "pool", seeds=1), workers=2)
    ray_records = run_plan(_plan(setup, tmp_path / "ray", seeds=1), workers=2, ray=True)
    import ray

    ray.shutdown()
    assert _comparable(pool) == _comparable(ray_records)
    assert len(pool) == 2 and all("error" not in r for r in pool.values())


def test_report_builds_from_a_small_real_run(setup, tmp_path):
    run_plan(_plan(setup, tmp_path, seeds=2), workers=1)
    md, page = build_report(tmp_path)
    text = md.read_text()
    assert "| oracle | 10 | trained |" in text and "| oracle | 10 | random |" in text
    assert "| oracle | 10 | search |" in text
    assert (tmp_path / "drop_by_size.png").stat().st_size > 0
    assert "<table>" in page.read_text()


def test_statistics():
    assert t_test_against_zero([0.0, 0.0, 0.0]) == 1.0
    assert t_test_against_zero([0.3, 0.4, 0.5, 0.35]) < 0.01
    low, high = bootstrap_ci([0.1, 0.2, 0.3, 0.4])
    assert 0.1 <= low < 0.25 < high <= 0.4
    summary = summarise({0: [0.1, 0.2], 1: [0.5, 0.7]})
    assert summary.maximum == pytest.approx(0.6) and summary.n == 4


def test_a_retrained_player_file_runs_its_trials_again(tmp_path):
    weights = tmp_path / "player.pt"
    weights.write_bytes(b"first weights")
    plan = Plan(players=[f"file:{weights}"], items=str(tmp_path / "items"), sizes=[10], minigames=1, seeds=1,
                steps=64, out=str(tmp_path / "out"))
    (trial,) = plan.trials()
    write_trials(plan.out, {trial["trial"]: {**trial, "drop": 0.0}})
    assert pending_trials(plan) == []
    weights.write_bytes(b"retrained weights")
    assert [t["trial"] for t in pending_trials(plan)] == [trial["trial"]]
    assert plan.trials()[0]["player_weights"] != trial["player_weights"]


def test_shipped_players_are_keyed_by_their_weights_file():
    from players.registry import SHIPPED_WEIGHTS, weights_file

    assert weights_file("state-rn") == SHIPPED_WEIGHTS / "state-rn.pt"
    assert weights_file("oracle") is None and weights_file("subprocess:python x.py") is None
