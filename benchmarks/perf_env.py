"""Env steps per second: the native batched vector env against gymnasium's SyncVectorEnv of single envs.

Both play the oracle on the same items with random moves; the batched env judges
the whole batch with numpy and asks the player once per batch.
Run: python -m benchmarks.perf_env
"""

from __future__ import annotations

import tempfile

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from benchmarks.timing import print_table, rate, row
from envs.adversarial import AdversarialSceneEnv
from envs.items import ItemPool, load_items
from envs.vector import AdversarialVectorEnv
from players.oracle import OraclePlayer

NUM_ENVS = 64


def benchmark_pool(num_scenes: int = 200, seed: int = 0) -> ItemPool:
    from clevr_game.generate import generate_dataset

    with tempfile.TemporaryDirectory() as folder:
        generate_dataset(folder, num_scenes, 5, seed, progress=False)
        return ItemPool(load_items(folder))


def run(quick: bool = False) -> list[dict]:
    pool = benchmark_pool(60 if quick else 200)
    player = OraclePlayer()
    rng = np.random.default_rng(0)

    singles = SyncVectorEnv([lambda: AdversarialSceneEnv(pool, player) for _ in range(NUM_ENVS)],
                            autoreset_mode=AutoresetMode.SAME_STEP)
    singles.reset(seed=0)

    def step_singles() -> int:
        singles.step(rng.integers(0, 7, (NUM_ENVS, 20)))
        return NUM_ENVS

    batched = AdversarialVectorEnv(pool, player, num_envs=NUM_ENVS)
    batched.reset(seed=0)

    def step_batched() -> int:
        batched.step(rng.integers(0, 7, (NUM_ENVS, 20)))
        return NUM_ENVS

    repeats = 2 if quick else 3
    baseline = rate(step_singles, repeats=repeats, min_seconds=0.5)
    value = rate(step_batched, repeats=repeats, min_seconds=0.5)
    return [row(f"env steps, oracle, N={NUM_ENVS} (vs SyncVectorEnv of singles)", "steps/s",
                baseline, value, ">= 10x")]


if __name__ == "__main__":
    print_table(run())
