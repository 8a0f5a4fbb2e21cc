"""The benchmark's plan from a preset: the preset's figures where the user gave none, the user's everywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.presets import PRESETS, preset_plan
from clevr_game.errors import InputError


def test_the_preset_fills_every_figure_left_out(tmp_path: Path) -> None:
    preset = PRESETS["table2"]
    plan = preset_plan(preset, tmp_path, players=["oracle"], items="pool")
    assert (plan.sizes, plan.adversaries, plan.eval_samples) == (list(preset.sizes), preset.adversaries, 32)
    assert [plan.budget(size) for size in plan.sizes] == [preset.budget(size) for size in preset.sizes]
    assert (plan.items, plan.out) == ("pool", str(tmp_path))


def test_a_figure_given_replaces_the_presets_at_every_size(tmp_path: Path) -> None:
    plan = preset_plan(PRESETS["table2"], tmp_path, players=["oracle"], items="pool", sizes=[10, 100], seeds=1,
                       adversaries=("state",), max_error_rate=0.5)
    assert [(b.size, b.seeds) for b in map(plan.budget, plan.sizes)] == [(10, 1), (100, 1)]
    assert [b.minigames for b in map(plan.budget, plan.sizes)] == [3, 2]  # still the preset's
    assert {t["adversary"] for t in plan.trials()} == {"state"} and plan.max_error_rate == 0.5
    assert len(plan.trials()) == 3 * 1 + 2 * 1


def test_a_mistyped_player_fails_before_the_pool_is_generated(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown player 'state-transformr'"):
        preset_plan(PRESETS["quick"], tmp_path, players=["oracle", "state-transformr"])
    assert not (tmp_path / "items").exists()
