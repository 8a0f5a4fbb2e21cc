"""Every numeric option has an upper bound and every output path is checked, each failing in one line (issue 61).

Huge values once gave tracebacks or worse: `--player-timeout 1e10` an OverflowError,
`--lr 1e300` a RuntimeError, `--num-envs 100000000` an ArrayMemoryError, `--threads
100000` a segmentation fault, `--eval-samples 100000000` the OOM killer at 23.9 GB;
`--out` naming a file a FileExistsError.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import pytest

from agents.attack import AttackOptions
from agents.commands import attack_bytes
from clevr_game import cli_types
from clevr_game.cli import build_parser, main

HUGE = (str(10**12), f"-{10**12}", "1e300", "-1e300")
PATH_TYPES = (cli_types.output_folder, cli_types.output_file)
BOUNDED_IN_HANDLER = {"--max-player-failures": ["play", "--items", "missing", "--max-player-failures", str(10**12)]}
"""Options whose parser type is open-ended but whose handler refuses a huge value (players/guard.py's
limits_from_args: at most the failure window); each is run to show it."""


def _options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif action.option_strings and action.type is not None:
            yield path, action


def _error_line(argv: list[str]) -> str:
    """The one line a refused command line leaves on stderr, its exit status asserted to be 2."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as stopped:
            status = stopped.code
    text = err.getvalue().strip()
    assert status == 2, text
    assert text.count("\n") == 0 and "Traceback" not in text, text
    return text


@pytest.mark.parametrize(("argv", "option"), [
    # measured in issue 61
    (["attack", "--player-timeout", "1e10"], "--player-timeout"),
    (["attack", "--lr", "1e300"], "--lr"),
    (["attack", "--num-envs", "100000000"], "--num-envs"),
    (["attack", "--threads", "100000"], "--threads"),
    (["attack", "--eval-samples", "100000000"], "--eval-samples"),
    # a sample of the others
    (["attack", "--rewards", "1", "0.1", "-0.1", "-1e300"], "--rewards"),
    (["attack", "--stay-bias", "1e6"], "--stay-bias"),
    (["attack", "--minigame-size", str(10**12)], "--minigame-size"),
    (["adversarial-training", "--num-envs", "100000000"], "--num-envs"),
    (["adversarial-training", "--workers", "100000"], "--workers"),
    (["benchmark", "--sizes", "10,100000000000"], "--sizes"),
    (["benchmark", "--seeds", "1000000"], "--seeds"),
    (["generate", "--num-scenes", "100000000"], "--num-scenes"),
    (["generate", "--max-objects", "11"], "--max-objects"),
    (["play", "--batch", "100000000"], "--batch"),
    (["players", "train", "--learning-rate", "11"], "--learning-rate"),
    (["players", "train", "--max-minutes", "1e9"], "--max-minutes"),
    (["players", "eval", "--threads", "100000"], "--threads"),
    (["poc", "train", "--learning-rate", "0"], "--learning-rate"),
    (["poc", "environment", "--objects", "100"], "--objects"),
    (["render", "--width", "100000"], "--width"),
    (["render", "--timeout", "1e300"], "--timeout"),
    (["study", "examples", "--image-size", "100000x96"], "--image-size"),
    (["exhaustive", "--stationary", "100"], "--stationary"),
])
def test_a_value_out_of_range_stops_the_parser_in_one_line(argv, option):
    line = _error_line(argv)
    assert f"error: argument {option}: " in line, line


def test_every_numeric_option_refuses_huge_values():
    """A new option without a bound fails here: give it a type from clevr_game.cli_types with a range."""
    open_ended = []
    for path, action in _options(build_parser()):
        option = action.option_strings[0]
        if action.type in PATH_TYPES or option in BOUNDED_IN_HANDLER:
            continue
        for text in HUGE:
            try:
                action.type(text)
            except argparse.ArgumentTypeError:
                continue
            open_ended.append(f"{' '.join(path)} {option} {text}")
    assert open_ended == []


@pytest.mark.parametrize("option", sorted(BOUNDED_IN_HANDLER))
def test_options_bounded_by_their_handler_refuse_huge_values_in_one_line(option):
    assert option in _error_line(BOUNDED_IN_HANDLER[option])


def test_the_ranges_hold_their_ends():
    threads = cli_types.int_in(1, cli_types.MAX_THREADS)
    assert threads("1") == 1 and threads("256") == 256
    rate = cli_types.float_in(0, cli_types.MAX_LEARNING_RATE, above_lo=True)
    assert rate("10") == 10.0 and rate("1e-9") == 1e-9
    assert cli_types.image_size("4096x1") == "4096x1"
    assert cli_types.int_list_in(1, 1000)("10, 1000") == "10, 1000"
    for check, text, message in [
        (threads, "257", "must be an integer in 1..256, got '257'"),
        (threads, "1e8", "must be an integer in 1..256, got '1e8'"),
        (rate, "0", "must be a number above 0, at most 10, got '0'"),
        (rate, "inf", "must be a number above 0, at most 10, got 'inf'"),
        (cli_types.float_in(-1, 1), "1.5", "must be a number in -1..1, got '1.5'"),
        (threads, "9" * 5000, "must be an integer in 1..256"),  # past Python's int-from-text digit limit
        (cli_types.image_size, "0x96", "each in 1..4096, got '0x96'"),
        (cli_types.image_size, "9" * 5000 + "x1", "must be WIDTHxHEIGHT"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            check(text)


# ---------------------------------------------------------------- combined options sized against the memory


@pytest.fixture
def one_gib(monkeypatch):
    monkeypatch.setattr(cli_types, "memory_bytes", lambda: 2**30)


@pytest.mark.parametrize(("argv", "names"), [
    (["attack", "--player", "oracle", "--items", "missing", "--minigame-size", "1000", "--eval-samples", "1000"],
     ["--minigame-size 1000", "--eval-samples 1000"]),
    (["adversarial-training", "--player", "state-rn", "--items", "missing", "--out", "x", "--size", "1000",
      "--eval-samples", "1000"], ["--size 1000", "--eval-samples 1000"]),
    (["benchmark", "--sizes", "10,100000", "--workers", "4"], ["--workers 4", "size 100000"]),
    (["generate", "--num-scenes", "100000", "--questions-per-scene", "10"],
     ["--num-scenes 100000", "--questions-per-scene 10"]),
    (["play", "--items", "missing", "--episodes", "1000000"], ["--episodes 1000000"]),
])
def test_options_that_together_outgrow_the_memory_stop_before_any_work(one_gib, tmp_path, monkeypatch, argv, names):
    monkeypatch.chdir(tmp_path)
    line = _error_line(argv)
    assert "would hold about" in line and "this machine has 1.0 GiB" in line, line
    assert all(name in line for name in names), line
    assert list(tmp_path.iterdir()) == []


def test_the_defaults_fit_in_little_memory():
    defaults = AttackOptions
    assert attack_bytes(defaults.minigame_size, defaults.eval_samples, defaults.num_envs, defaults.steps) < 2**24
    assert cli_types.memory_bytes() is None or cli_types.memory_bytes() > 2**28


# ---------------------------------------------------------------- output paths


def test_every_output_folder_refuses_an_existing_file_in_one_line(tmp_path):
    existing = tmp_path / "a-file"
    existing.write_text("")
    checked = []
    for path, action in _options(build_parser()):
        if action.type is not cli_types.output_folder:
            continue
        option = action.option_strings[0]
        for given in (existing, existing / "below"):
            line = _error_line([*path, option, str(given)])
            assert f"argument {option}: '{given}'" in line and f"'{existing}' is an existing file" in line, line
        checked.append(f"{' '.join(path)} {option}")
    assert {"attack --out", "benchmark --out", "generate --out", "export --out", "render --out",
            "adversarial-training --out", "exhaustive --out", "poc generate --out",
            "study examples --out"} <= set(checked)


def test_every_output_file_refuses_an_existing_folder_in_one_line(tmp_path):
    checked = []
    for path, action in _options(build_parser()):
        if action.type is not cli_types.output_file:
            continue
        option = action.option_strings[0]
        line = _error_line([*path, option, str(tmp_path)])
        assert f"argument {option}: '{tmp_path}' is an existing folder, not a file" in line, line
        checked.append(f"{' '.join(path)} {option}")
    assert {"answer --out", "players train --out", "poc train --out", "poc environment --out"} <= set(checked)


def test_an_output_folder_may_exist_or_not(tmp_path):
    assert cli_types.output_folder(str(tmp_path)) == str(tmp_path)
    assert cli_types.output_folder(str(tmp_path / "new" / "deeper")) == str(tmp_path / "new" / "deeper")
    assert cli_types.output_file(str(tmp_path / "new.json")) == str(tmp_path / "new.json")
    assert not Path(tmp_path / "new").exists()
