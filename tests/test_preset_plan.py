"""The benchmark's plan from a preset: the preset's figures where the user gave none, the user's everywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.presets import PRESETS, preset_plan
from clevr_game.errors import InputError


def test_the_preset_fills_every_figure_left_out(tmp_path: Path) -> None:
    preset = PRESETS["table2"]
    plan = preset_plan(preset, tmp_path, players=["oracle"], items="pool")
    assert (plan.sizes, plan.adversaries, plan.eval_samples) == (list(preset.sizes), preset.adversaries, 16)
    assert plan.check_visibility is None  # the preset's referees come with the command's options
    assert [plan.budget(size) for size in plan.sizes] == [preset.budget(size) for size in preset.sizes]
    assert (plan.items, plan.out) == ("pool", str(tmp_path))


def test_a_figure_given_replaces_the_presets_at_every_size(tmp_path: Path) -> None:
    plan = preset_plan(PRESETS["table2"], tmp_path, players=["oracle"], items="pool", sizes=[10, 100], seeds=1,
                       adversaries=("state",), max_error_rate=0.5)
    assert [(b.size, b.seeds) for b in map(plan.budget, plan.sizes)] == [(10, 1), (100, 1)]
    assert [b.minigames for b in map(plan.budget, plan.sizes)] == [10, 5]  # still the preset's
    assert {t["adversary"] for t in plan.trials()} == {"state"} and plan.max_error_rate == 0.5
    assert len(plan.trials()) == 10 * 1 + 5 * 1


def test_a_mistyped_player_fails_before_the_pool_is_generated(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown player 'state-transformr'"):
        preset_plan(PRESETS["quick"], tmp_path, players=["oracle", "state-transformr"])
    assert not (tmp_path / "items").exists()


# A subprocess command line with commas: --players' comma-separated list would cut it in pieces.
COMMA_SPEC = ("subprocess:python -c \"import json, sys; [print(json.dumps({'id': json.loads(line)['id'], "
              "'answer': 'yes'}), flush=True) for line in sys.stdin]\"")


def _benchmark_args(*options: str):
    from clevr_game.cli import build_parser

    return build_parser().parse_args(["benchmark", *options])


def test_player_takes_a_spec_with_commas_whole(tmp_path: Path) -> None:
    from benchmarks.commands import player_specs

    specs = player_specs(_benchmark_args("--player", COMMA_SPEC))
    plan = preset_plan(PRESETS["quick"], tmp_path, players=specs, items="pool")
    assert plan.players == [COMMA_SPEC]
    assert {t["player"] for t in plan.trials()} == {COMMA_SPEC}


def test_players_come_first_then_each_player_in_order() -> None:
    from benchmarks.commands import player_specs

    args = _benchmark_args("--player", COMMA_SPEC, "--players", "oracle,state-rn", "--player", "majority")
    assert player_specs(args) == ["oracle", "state-rn", COMMA_SPEC, "majority"]
    assert player_specs(_benchmark_args("--players", "oracle")) == ["oracle"]
    assert player_specs(_benchmark_args()) is None
