"""A failing player never looks robust: errors are counted, excluded, and fail their trial.

The fault players are small JSON-lines scripts written here (the subprocess
protocol of docs/players.md) or in-process Player subclasses with a scripted rule.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.attack import AttackOptions, PlayerFailedRun, run_attack
from agents.evaluation import evaluate, scores
from benchmarks.runner import TRIALS_FILE, pending_trials, read_trials, write_trials
from benchmarks.trials import Plan, player_slug
from clevr_game.cli import main
from clevr_game.generate import generate_dataset
from clevr_game.text import default_word_vocabulary
from envs.game import Game
from envs.items import ItemPool, load_items
from players.guard import PlayerGaveUp, PlayerGuard
from players.oracle import OraclePlayer
from players.protocol import Answer, Player, Query
from players.state.checkpoint import player_file_from, save_player_file
from players.state.features import ANSWERS
from players.state.models import build_model

TINY_RN = {"width": 32, "word_width": 16, "question_width": 32, "g_layers": 2, "f_width": 32, "dropout": 0.0}

# Answers "yes" (a valid answer, right or wrong) on a scene it has not seen moved;
# what it does on a moved scene, or on every third query, is the fault under test.
FAULT_PLAYER = textwrap.dedent("""
    import json, sys, time
    mode, seen, count = sys.argv[1], {}, 0
    for line in sys.stdin:
        query = json.loads(line)
        count += 1
        coords = [o["3d_coords"] for o in query["scene"]["objects"]]
        moved = seen.setdefault(query["id"], coords) != coords
        if mode == "error-when-moved" and moved:
            reply = {"id": query["id"], "error": "cannot answer moved scenes"}
        elif mode == "hang-every-third" and count % 3 == 0:
            time.sleep(3600)
        else:
            reply = {"id": query["id"], "answer": "yes"}
        print(json.dumps(reply), flush=True)
""")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("faulty")
    generate_dataset(root / "items", 30, 1, seed=3, progress=False)
    torch.manual_seed(0)
    words = default_word_vocabulary()
    network = build_model("relation-network", TINY_RN, len(words), len(ANSWERS))
    save_player_file(root / "rn.pt", player_file_from(network, "relation-network", words, list(ANSWERS), {}))
    script = root / "fault_player.py"
    script.write_text(FAULT_PLAYER)
    return root


def _spec(setup: Path, mode: str) -> str:
    return f"subprocess:{sys.executable} {setup / 'fault_player.py'} {mode}"


class ScriptedPlayer(Player):
    """The oracle's answers, except for the queries `fails(n, query)` picks (n counts from 0)."""

    needs = OraclePlayer.needs

    def __init__(self, fails):
        self.oracle = OraclePlayer()
        self.fails = fails
        self.asked = 0

    def answer_batch(self, queries):
        answers = []
        for query, answer in zip(queries, self.oracle.answer_batch(queries), strict=True):
            failed = self.fails(self.asked, query)
            answers.append(Answer.failed(query.item_id, "scripted failure") if failed else answer)
            self.asked += 1
        return answers


# ---------------------------------------------------------------- the guard


def test_guard_counts_and_gives_up_within_its_window():
    failures = {0, 5, 6, 7}
    guard = PlayerGuard(ScriptedPlayer(lambda n, q: n in failures), max_failures=3, window=4)
    pool = ItemPool(load_items_from_generated())
    queries = [Query(it.item_id, it.question, scene=it.scene, program=it.program) for it in pool.items[:5]]
    guard.answer_batch(queries)  # 1 failure of 5
    assert guard.count.queries == 5 and guard.count.errors == 1
    assert guard.count.first_error.endswith("scripted failure")
    with pytest.raises(PlayerGaveUp, match="3 of its last 4 queries failed"):
        guard.answer_batch(queries[:3])  # queries 5, 6, 7 fail: 3 of the last 4
    assert guard.count.errors == 4


def test_guard_without_a_limit_never_gives_up():
    guard = PlayerGuard(ScriptedPlayer(lambda n, q: True), max_failures=None)
    pool = ItemPool(load_items_from_generated())
    answers = guard.answer_batch([Query(it.item_id, it.question, scene=it.scene, program=it.program)
                                  for it in pool.items])
    assert not any(a.ok for a in answers) and guard.count.error_rate == 1.0


_GENERATED: dict[str, list] = {}


def load_items_from_generated():
    if "items" not in _GENERATED:
        import tempfile

        folder = Path(tempfile.mkdtemp()) / "items"
        generate_dataset(folder, 12, 1, seed=5, progress=False)
        _GENERATED["items"] = load_items(str(folder))
    return _GENERATED["items"]


# ---------------------------------------------------------------- unmoved answers


def test_a_transient_failure_of_an_unmoved_answer_is_retried_not_cached():
    player = ScriptedPlayer(lambda n, q: n == 0)  # only the very first query fails
    game = Game(ItemPool(load_items_from_generated()), player)
    answers = game.old_answers(range(4))
    assert all(a.ok for a in answers)
    assert player.asked == 5  # four items, one retry
    game.old_answers(range(4))
    assert player.asked == 5  # successes are cached


def test_a_persistent_failure_of_an_unmoved_answer_is_asked_a_bounded_number_of_times():
    pool = ItemPool(load_items_from_generated())
    broken = pool.items[1].item_id
    player = ScriptedPlayer(lambda n, q: q.item_id == broken)
    game = Game(pool, player, old_answer_attempts=3)
    answers = game.old_answers([0, 1, 2])
    assert [a.ok for a in answers] == [True, False, True]
    assert player.asked == 3 + 2
    game.old_answers([1])
    assert player.asked == 5  # its failure now stands


def test_an_item_never_answered_unmoved_is_left_out_of_the_trial(setup, tmp_path, monkeypatch):
    items = load_items(str(setup / "items"))
    broken = items[0].item_id
    import players.registry as registry

    registry.register("scripted-broken-item", lambda **kw: ScriptedPlayer(lambda n, q: q.item_id == broken),
                      replace=True)
    result = run_attack(AttackOptions(
        player="scripted-broken-item", items=str(setup / "items"), minigame_size=30, steps=128, num_envs=64,
        eval_samples=4, out=str(tmp_path / "run"), adversary_weights=str(setup / "rn.pt"), progress=False,
        max_error_rate=1.0,
    ))
    assert result["items_left_out"] == 1
    assert result["left_out_items"][0]["item_id"] == broken
    assert broken not in {r["item_id"] for r in result["items"]}
    assert len(result["items"]) == 29
    assert result["player_errors"] == 3  # asked three times, then left out


# ---------------------------------------------------------------- moved answers


def test_an_error_on_a_moved_scene_is_neither_a_flip_nor_a_hold():
    pool = ItemPool(load_items_from_generated())
    original = {it.item_id: [o.coords for o in it.scene.objects] for it in pool.items}

    def fails(n, query):  # even items: every moved scene fails; odd items: every moved scene flips
        index = next(i for i, it in enumerate(pool.items) if it.item_id == query.item_id)
        return index % 2 == 0 and [o.coords for o in query.scene.objects] != original[query.item_id]

    class FlipOnOdd(ScriptedPlayer):
        def answer_batch(self, queries):
            answers = super().answer_batch(queries)
            flipped = []
            for query, answer in zip(queries, answers, strict=True):
                moved = [o.coords for o in query.scene.objects] != original[query.item_id]
                if answer.ok and moved:
                    answer = Answer(query.item_id, "yes" if answer.text != "yes" else "no")
                flipped.append(answer)
            return flipped

    game = Game(pool, FlipOnOdd(fails))
    indices = list(range(len(pool)))
    rng = np.random.default_rng(0)

    def one_small_move(items, heads):  # head 0 steps 0.3 along x or y: mostly valid scenes
        actions = np.full((len(items), 20), 3)
        actions[np.arange(len(items)), rng.integers(0, 2, len(items))] = rng.choice([2, 4], len(items))
        return actions

    results = evaluate(game, indices, one_small_move, samples=16, seed=1)
    for index, result in enumerate(results):
        valid_moved = [o for o in result.valid_moves]
        if index % 2 == 0:
            assert result.changed_share == 0.0 and not result.changed
            assert not valid_moved  # errored moves are not kept as manipulations
        else:
            assert result.player_errors == 0
    even_errors = sum(r.player_errors for r in results[0::2])
    assert even_errors > 0
    summary = scores(results)
    # An item with an errored move is unscored: its errors could have hidden flips.
    scored = [r for r in results if r.player_errors == 0]
    expected = np.mean([r.changed_share for r in scored])
    assert summary.consistency == pytest.approx(expected)
    assert summary.items_counted == len(scored)
    assert summary.unscored_items == sum(r.player_errors > 0 for r in results[0::2]) > 0
    assert summary.player_errors == even_errors
    assert summary.queries == sum(r.queries for r in results) >= even_errors
    # Per item, errors leave the denominator: the odd items' shares are over all their samples.
    for result in results[1::2]:
        assert result.changed_share == pytest.approx(result.valid_moves.__len__() / 16)


def test_a_player_failing_every_moved_scene_fails_its_trial(setup, tmp_path):
    with pytest.raises(PlayerFailedRun, match="player queries failed") as caught:
        run_attack(AttackOptions(
            player=_spec(setup, "error-when-moved"), items=str(setup / "items"), minigame_size=10, steps=128,
            num_envs=64, eval_samples=4, out=str(tmp_path / "run"), adversary_weights=str(setup / "rn.pt"),
            progress=False, max_player_failures=None,
        ))
    assert caught.value.count.errors > 0.05 * caught.value.count.queries
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["failed"].startswith(f"{result['player_errors']} of {result['player_queries']}")
    assert result["player_error_rate"] > 0.05


# ---------------------------------------------------------------- trial ids and resume


def test_trial_ids_of_different_specs_never_collide(tmp_path):
    long = "subprocess:python /a/very/long/path/to/some/player/folder/that/goes/on/and/on/"
    specs = ["subprocess:python q.a.py", "subprocess:python q_a.py", long + "one.py", long + "two.py"]
    plan = Plan(players=specs, items="unused", sizes=[10], minigames=1, seeds=1, steps=128, out=str(tmp_path))
    trials = plan.trials()
    assert len({t["trial"] for t in trials}) == len({t["run"] for t in trials}) == 4
    assert player_slug("subprocess:python q.a.py").startswith("subprocess_python_q_a_py-")


def test_resume_checks_the_recorded_spec_not_only_the_id(tmp_path):
    plan = Plan(players=["oracle"], items="unused", sizes=[10], minigames=1, seeds=1, steps=128, out=str(tmp_path))
    (trial,) = plan.trials()
    finished = {k: trial[k] for k in ("trial", "player", "size", "minigame", "seed", "steps", "run")}
    write_trials(tmp_path, {trial["trial"]: dict(finished, consistency=0.0, drop=0.0)})
    assert pending_trials(plan) == []
    write_trials(tmp_path, {trial["trial"]: dict(finished, player="someone else", consistency=0.0, drop=0.0)})
    assert [t["trial"] for t in pending_trials(plan)] == [trial["trial"]]
    write_trials(tmp_path, {trial["trial"]: dict(finished, steps=64, consistency=0.0, drop=0.0)})
    assert len(pending_trials(plan)) == 1


# ---------------------------------------------------------------- the command line


def test_benchmark_refuses_an_unknown_player_before_any_trial(setup, tmp_path, capsys):
    rc = main(["benchmark", "--players", "oracle,nosuch", "--items", str(setup / "items"), "--sizes", "10",
               "--minigames", "1", "--seeds", "1", "--steps", "128", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "unknown player 'nosuch'" in err and "\n" not in err
    assert not (tmp_path / TRIALS_FILE).exists()


def test_benchmark_with_a_good_and_a_failing_player_exits_1_and_reports_both(setup, tmp_path, capsys):
    bad = _spec(setup, "error-when-moved")
    rc = main(["benchmark", "--players", f"oracle,{bad}", "--items", str(setup / "items"), "--sizes", "10",
               "--minigames", "1", "--seeds", "1", "--steps", "128", "--out", str(tmp_path), "--no-progress",
               "--workers", "1", "--adversary-weights", str(setup / "rn.pt")])
    captured = capsys.readouterr()
    assert rc == 1
    assert "trials: 2 finished: 1 failed: 1" in captured.out
    assert "1 trial(s) failed" in captured.err
    records = read_trials(tmp_path)
    good = next(r for r in records.values() if r["player"] == "oracle")
    failed = next(r for r in records.values() if r["player"] == bad)
    assert "error" not in good and good["player_errors"] == 0 and good["player_error_rate"] == 0.0
    assert "cannot answer moved scenes" in failed["error"] and failed["player_errors"] > 0
    report = (tmp_path / "report.md").read_text()
    assert "## Failed trials" in report and f"{failed['player_errors']} of {failed['player_queries']}" in report
    assert "| player errors |" in report and "| 0 (0.00%) |" in report


def test_benchmark_player_runs_a_subprocess_spec_whose_command_holds_commas(setup, tmp_path, capsys):
    spec = (f"subprocess:{sys.executable} -c \"import json, sys; [print(json.dumps({{'id': json.loads(line)['id'], "
            f"'answer': 'yes'}}), flush=True) for line in sys.stdin]\"")
    rc = main(["benchmark", "--player", spec, "--items", str(setup / "items"), "--sizes", "10",
               "--minigames", "1", "--seeds", "1", "--steps", "128", "--out", str(tmp_path), "--no-progress",
               "--workers", "1", "--adversary-weights", str(setup / "rn.pt"), "--gallery-preset", "schematic"])
    assert rc == 0 and "trials: 1 finished: 1 failed: 0" in capsys.readouterr().out
    assert [record["player"] for record in read_trials(tmp_path).values()] == [spec]


def test_play_exits_1_when_the_player_fails_too_often(setup, capsys):
    rc = main(["play", "--items", str(setup / "items"), "--player", _spec(setup, "error-when-moved"),
               "--episodes", "64", "--max-player-failures", "0"])
    captured = capsys.readouterr()
    assert rc == 1
    assert "player errors:" in captured.out and "--max-error-rate" in captured.err
    assert captured.out.strip().splitlines()[-1].startswith("consistency: 0.0000 drop: 0.0000")


def test_play_gives_up_on_a_player_that_hangs_every_third_query(setup, capsys):
    rc = main(["play", "--items", str(setup / "items"), "--player", _spec(setup, "hang-every-third"),
               "--episodes", "200", "--batch", "8", "--player-timeout", "0.5", "--max-player-failures", "3"])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert "gave up on player" in err and "hang" in err and "\n" not in err


@pytest.mark.parametrize("option", [["--player-timeout", "0"], ["--max-error-rate", "1.5"],
                                    ["--max-player-failures", "1000"], ["--max-player-failures", "-1"]])
def test_player_limit_options_are_checked(setup, option, capsys):
    try:
        rc = main(["play", "--items", str(setup / "items"), "--episodes", "1", *option])
    except SystemExit as exit_:  # refused by the parser
        rc = exit_.code
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and option[0] in err


def test_players_eval_exits_1_when_the_player_fails_too_often(setup, capsys):
    rc = main(["players", "eval", "--player", "subprocess:false", "--data", str(setup / "items"),
               "--no-progress", "--max-player-failures", "0"])
    captured = capsys.readouterr()
    assert rc == 1
    assert captured.out.strip().splitlines()[-1] == "accuracy: 0.0000"
    assert "players eval:" in captured.err and "--max-error-rate" in captured.err
