"""No trial is lost or changed in silence: one writer per folder, strict record files, counts across resumes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents.attack import AttackOptions, run_attack
from benchmarks.runner import read_trials, run_plan
from benchmarks.trials import Plan
from clevr_game.cli import main
from clevr_game.errors import InputError
from clevr_game.folder_lock import LOCK_FILE, sole_writer
from clevr_game.generate import generate_dataset
from clevr_game.jsonl import append_json_line, json_lines
from clevr_game.run_files import TRIALS_FILE

FIXTURE = Path(__file__).parent / "data" / "table2_trials.jsonl"

HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from clevr_game.folder_lock import sole_writer
    with sole_writer(sys.argv[1], "benchmark"):
        print("held", flush=True)
        time.sleep(60)
""")


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    root = tmp_path_factory.mktemp("integrity")
    generate_dataset(root / "items", 20, 1, seed=3, progress=False)
    return root / "items"


@pytest.fixture
def held(tmp_path):
    """A folder whose lock another process holds, as a running benchmark would."""
    folder = tmp_path / "results"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    yield folder
    holder.kill()
    holder.wait()


def test_a_second_benchmark_into_a_held_folder_is_refused_in_one_line(held, items, capsys):
    rc = main(["benchmark", "--players", "oracle", "--items", str(items), "--sizes", "10", "--minigames", "1",
               "--seeds", "1", "--steps", "64", "--out", str(held), "--workers", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert str(held) in err[0] and "another benchmark is writing there" in err[0]
    assert not (held / TRIALS_FILE).exists()


def test_a_second_attack_into_a_held_run_folder_is_refused(held, items):
    with pytest.raises(InputError, match="another attack is writing there"):
        run_attack(AttackOptions(player="oracle", items=str(items), out=str(held), steps=64, num_envs=64,
                                 progress=False))


def test_the_lock_is_freed_when_its_holder_dies(tmp_path):
    folder = tmp_path / "results"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    with sole_writer(folder, "benchmark"):
        assert (folder / LOCK_FILE).exists()


def test_benchmark_appends_each_trial_and_keeps_every_record(items, tmp_path):
    plan = Plan(players=["oracle"], items=str(items), sizes=[10], minigames=2, seeds=1, steps=64,
                out=str(tmp_path), num_envs=64, eval_samples=2, search_budget=0)
    seen = []
    run_plan(plan, on_record=lambda record: seen.append(len(read_trials(tmp_path))))
    assert seen == [1, 2]  # each record is on disk as soon as its trial ends
    lines = (tmp_path / TRIALS_FILE).read_text().splitlines()
    assert [json.loads(line)["trial"] for line in lines] == sorted(read_trials(tmp_path))


def _report_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / TRIALS_FILE)
    return folder


def _lines(folder: Path) -> list[bytes]:
    return (folder / TRIALS_FILE).read_bytes().split(b"\n")


def _write(folder: Path, lines: list[bytes]) -> None:
    (folder / TRIALS_FILE).write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("damage, message", [
    (lambda line: line[: len(line) // 2], "line 3: invalid JSON"),
    (lambda line: line.replace(b'"drop": ', b'"drop": "0.5", "x": ', 1), "line 3: field 'drop' must be"),
    (lambda line: line.replace(b'"minigame": 0', b'"minigame": 0.5', 1), "line 3: field 'minigame' must be an integer"),
    (lambda line: line[:40] + b"\xff" + line[40:], "line 3: not UTF-8 text"),
    (lambda line: b"[1, 2]", "line 3: expected a JSON object"),
])
def test_report_refuses_a_damaged_line_naming_file_and_line(tmp_path, capsys, damage, message):
    folder = _report_folder(tmp_path)
    lines = _lines(folder)
    lines[2] = damage(lines[2])
    _write(folder, lines)
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{folder / TRIALS_FILE}: {message}" in err[0]
    assert not (folder / "report.md").exists()


def test_export_and_resume_refuse_a_non_utf8_line(tmp_path, items, capsys):
    folder = _report_folder(tmp_path)
    lines = _lines(folder)
    lines[0] = lines[0][:10] + b"\xfe" + lines[0][10:]
    _write(folder, lines)
    assert main(["export", "--run", str(folder), "--out", str(tmp_path / "exported")]) == 2
    assert "line 1: not UTF-8 text" in capsys.readouterr().err
    plan = Plan(players=["oracle"], items=str(items), sizes=[10], minigames=1, seeds=1, steps=64, out=str(folder))
    with pytest.raises(InputError, match="line 1: not UTF-8 text"):
        run_plan(plan)


def test_an_unfinished_last_line_is_skipped_with_a_warning_and_cut_before_the_next_append(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    append_json_line(path, {"trial": "a", "drop": 0.0})
    with open(path, "ab") as handle:
        handle.write(b'{"trial": "b", "dr')  # a writer killed mid-line
    assert [value["trial"] for _, value in json_lines(path, unfinished_tail_ok=True)] == ["a"]
    assert "line 2: an unfinished record" in capsys.readouterr().err
    with pytest.raises(InputError, match="line 2: invalid JSON"):
        list(json_lines(path))
    append_json_line(path, {"trial": "c", "drop": 0.5})
    assert [value["trial"] for _, value in json_lines(path)] == ["a", "c"]


def test_a_resumed_attack_counts_the_queries_of_every_part(items, tmp_path):
    options = AttackOptions(player="oracle", items=str(items), out=str(tmp_path / "run"), steps=256, num_envs=64,
                            eval_samples=2, progress=False, random_valid=False)
    first = run_attack(options)
    # A second run finds the finished checkpoint, resumes after training and evaluates again:
    # its count holds the first part's queries up to that checkpoint, then its own.
    (tmp_path / "run" / "result.json").unlink()
    second = run_attack(options)
    evaluation = 2 * first["random_eval_queries"]  # both evaluations ask about as many moved scenes
    assert second["player_queries"] > first["player_queries"] > evaluation


# ---------------------------------------------------------------- which weights each results folder was made with


@pytest.mark.parametrize("folder", ["results/quick", "results/table2"])
def test_the_weights_note_lists_every_player_file_the_trials_ran_against(folder: str) -> None:
    from benchmarks.weights_note import made_with, note

    path = Path(__file__).resolve().parent.parent / folder
    assert (path / "WEIGHTS.md").read_text() == note(path, made_with(path))
    assert all(digest != "none" for player, digest in made_with(path) if player != "oracle")


def test_the_weights_note_names_a_bad_trial_line(tmp_path: Path) -> None:
    from benchmarks.weights_note import made_with

    (tmp_path / "trials.jsonl").write_text('{"player": "film", "player_weights": "ab"}\n{"player": \n')
    with pytest.raises(InputError, match="trials.jsonl: line 2: not JSON"):
        made_with(tmp_path)
    (tmp_path / "trials.jsonl").write_text('{"player": "film", "player_weights": "ab"}\n' * 2)
    assert made_with(tmp_path) == {("film", "ab"): 2}
