"""The command line only lists command groups: each package's `commands` module adds its own."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from clevr_game.cli import COMMAND_GROUPS, build_parser

REPO = Path(__file__).resolve().parents[1]


def _handlers(parser: argparse.ArgumentParser, path: str = "") -> dict[str, object]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_handlers(sub, f"{path} {name}".strip()))
    if not found and path:
        found[path] = parser.get_default("handler")
    return found


def test_every_command_is_handled_in_a_packages_commands_module() -> None:
    modules = {module for module, _, _ in COMMAND_GROUPS}
    handlers = _handlers(build_parser())
    top_level = list(dict.fromkeys(command.split()[0] for command in handlers))
    assert top_level == ["generate", "answer", "play", "attack", "benchmark", "report", "evaluate", "leaderboard",
                         "poc", "export",
                         "adversarial-training", "players", "render", "exhaustive", "study"]
    stray = {command: handler.__module__ for command, handler in handlers.items()
             if handler.__module__ not in modules}
    assert stray == {}
    assert top_level == [command for _, _, commands in COMMAND_GROUPS for command in commands]


def test_a_command_builds_only_its_own_group() -> None:
    for _, _, commands in COMMAND_GROUPS:
        for command in commands:
            chosen = build_parser([command, "--help"])._subparsers._group_actions[0].choices
            assert set(chosen) == set(commands)
    code = ("import sys; from clevr_game.cli import build_parser; build_parser(['answer', '-h']); "
            "print(sorted(m for m in ('numpy', 'gymnasium', 'clevr_game.generate') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_help_loads_no_learning_library_nor_blender() -> None:
    code = ("import sys; from clevr_game.cli import build_parser; build_parser().format_help(); "
            "print(sorted(m for m in ('torch', 'bpy', 'stable_baselines3') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_players_train_leaves_unset_tunables_to_each_trainers_own_defaults() -> None:
    from dataclasses import fields

    from players.commands import TUNABLES, given_tunables
    from players.pixel.training import PixelTrainingOptions
    from players.state.training import TrainingOptions

    base = ["players", "train", "--player", "film", "--data", "d", "--out", "o"]
    assert given_tunables(build_parser(base).parse_args(base)) == {}
    given = build_parser(base).parse_args([*base, "--learning-rate", "0.1", "--steps", "7"])
    assert given_tunables(given) == {"learning_rate": 0.1, "steps": 7}
    # Every tunable is a field of both trainers' options, which disagree on some defaults.
    state, pixel = ({f.name: f.default for f in fields(kind)} for kind in (TrainingOptions, PixelTrainingOptions))
    assert set(TUNABLES) <= set(state) & set(pixel)
    assert any(state[name] != pixel[name] for name in TUNABLES)


def test_players_train_passes_the_perception_source_to_the_pixel_trainer() -> None:
    base = ["players", "train", "--player", "film", "--data", "d", "--out", "o"]
    args = build_parser(base).parse_args([*base, "--perception-from", "other/neuro-symbolic.pt"])
    assert args.perception_from == "other/neuro-symbolic.pt"
    assert build_parser(base).parse_args(base).perception_from is None


def _player_options(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.Action]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_player_options(sub, f"{path} {name}".strip()))
        elif {"--player", "--players"} & set(action.option_strings):
            found[f"{path} {action.option_strings[0]}"] = action
    return found


def test_every_option_taking_a_player_spec_says_its_forms() -> None:
    from players.registry import PLAYER_SPEC_HELP

    options = _player_options(build_parser())
    # These train or fine-tune the player, so they take only the kinds they can train, never an external one.
    trains = {"adversarial-training --player", "study examples --players"}
    takes_a_spec = {name: action for name, action in options.items() if action.choices is None and name not in trains}
    assert {"play --player", "attack --player", "benchmark --player", "benchmark --players", "players eval --player",
            "poc eval --player"} <= set(takes_a_spec)
    for name, action in takes_a_spec.items():
        assert PLAYER_SPEC_HELP in action.help, name
        assert "subprocess:" in action.help and "http" in action.help, name
