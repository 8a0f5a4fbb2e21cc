"""Benchmark presets: `quick` (minutes on a 2-core machine) and `paper` (the paper's Table 2 scale)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    players: tuple[str, ...]
    sizes: tuple[int, ...]
    minigames: int
    seeds: int
    steps: int
    eval_samples: int
    search_budget: int
    pool_scenes: int
    pool_questions_per_scene: int


SHIPPED_PLAYERS = ("state-transformer", "state-rn")

PRESETS: dict[str, Preset] = {
    "quick": Preset(SHIPPED_PLAYERS, (10,), 2, 3, 20_000, 32, 100, 200, 2),
    "paper": Preset(SHIPPED_PLAYERS, (10, 100, 1000), 3, 30, 100_000, 64, 500, 5_000, 2),
}
POOL_SEED = 0
