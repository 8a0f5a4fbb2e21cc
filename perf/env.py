"""Env steps per second: the native batched vector env against gymnasium's SyncVectorEnv of single envs.

Both play the oracle on the same items with random moves; the batched env judges
the whole batch with numpy and asks the player once per batch.
Run: python -m perf.env
"""

from __future__ import annotations

import tempfile
import time

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from envs.adversarial import AdversarialSceneEnv
from envs.items import ItemPool, load_items
from envs.vector import AdversarialVectorEnv
from perf.timing import print_table, rate, row
from players.oracle import OraclePlayer
from players.timed import TimedPlayer

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
    rows = [row(f"env steps, oracle, N={NUM_ENVS} (vs SyncVectorEnv of singles)", "steps/s",
                baseline, value, ">= 10x")]
    try:
        rows.append(overhead_row(pool, "state-transformer", 8 if quick else 30))
    except Exception as exc:  # the shipped player may be missing in a trimmed checkout
        print(f"env overhead with a neural player: not measured ({type(exc).__name__}: {exc})")
    return rows


def overhead_row(pool: ItemPool, player_name: str, steps: int) -> dict:
    """Share of a batched step spent outside a batched neural player (goal: under 10%).

    Moves are one object at a time, the kind a trained adversary makes, so most
    scenes are valid and reach the player, as in training.
    """
    from players.registry import load as load_player

    player = TimedPlayer(load_player(player_name))
    env = AdversarialVectorEnv(pool, player, num_envs=NUM_ENVS)
    env.reset(seed=0)
    rng = np.random.default_rng(1)

    def one_object_moves() -> np.ndarray:
        actions = np.full((NUM_ENVS, 20), 3)
        heads = rng.integers(0, 10, NUM_ENVS)  # empty heads make a stay move: also a real case
        actions[np.arange(NUM_ENVS), 2 * heads] = rng.integers(0, 7, NUM_ENVS)
        actions[np.arange(NUM_ENVS), 2 * heads + 1] = rng.integers(0, 7, NUM_ENVS)
        return actions

    # What the game computes once per item (old answer, compiled scene and program) is computed
    # outside the measurement, by one unmoved pass over the pool: the steady state of training.
    everyone = np.arange(len(pool))
    env.game.play(everyone, np.tile(np.arange(10), (len(pool), 1)), np.full((len(pool), 20), 3))
    env.step(one_object_moves())
    player.seconds = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        env.step(one_object_moves())
    total = time.perf_counter() - start
    player.inner.close()
    share = (total - player.seconds) / total
    return {"name": f"env overhead share with {player_name}, N={NUM_ENVS}", "unit": "% of step time",
            "baseline": 100.0, "value": 100.0 * share, "ratio": share, "goal": "< 10%"}


if __name__ == "__main__":
    print_table(run())
