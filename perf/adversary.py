"""Adversary training speed: the project's A2C loop against SB3 A2C over a DummyVecEnv of single envs.

Both train the same policy (relation-network features, ten heads, critic) against
the same player on the same items. Ours steps the batched vector env with cached
frozen features; the baseline is stable-baselines3's A2C as a user would write it.
Run: python -m perf.adversary [--player NAME]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from perf.timing import print_table, row

SB3_ENVS = 16
OUR_ENVS = 256


def _pool(num_scenes: int):
    from clevr_game.generate import generate_dataset
    from envs.items import ItemPool, load_items

    with tempfile.TemporaryDirectory() as folder:
        generate_dataset(folder, num_scenes, 1, seed=5, progress=False)
        items = load_items(folder)
    return ItemPool(items[:10])  # a size-10 mini-game


def run(quick: bool = False, player_name: str = "state-transformer") -> list[dict]:
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.vec_env import DummyVecEnv

    from agents.a2c import A2CConfig, A2CTrainer
    from agents.features import FeatureCache, RelationalFeatures
    from agents.policy import AdversaryPolicy
    from agents.pretrained import load_adversary_network
    from envs.adversarial import AdversarialSceneEnv
    from envs.vector import AdversarialVectorEnv
    from players.registry import load as load_player

    torch.set_num_threads(2)
    pool = _pool(40)
    network, word_map = load_adversary_network(None, pool.words)
    player = load_player(player_name)

    sb3_env = DummyVecEnv([lambda: AdversarialSceneEnv(pool, player) for _ in range(SB3_ENVS)])
    model = A2C(AdversaryPolicy, sb3_env, seed=0, device="cpu", policy_kwargs={
        "features_extractor_class": RelationalFeatures,
        "features_extractor_kwargs": {"network": network, "word_map": word_map, "freeze": True},
    })
    model.learn(SB3_ENVS * 5)  # warm-up: old answers cached, first compilation done
    sb3_steps = SB3_ENVS * 5 * (4 if quick else 20)
    start = time.perf_counter()
    model.learn(sb3_steps)
    baseline = sb3_steps / (time.perf_counter() - start)

    env = AdversarialVectorEnv(pool, player, OUR_ENVS)
    trainer = A2CTrainer(env, FeatureCache(network, word_map, pool),
                         A2CConfig(steps=10**9, num_envs=OUR_ENVS, seed=0))
    trainer.step()
    updates = 5 if quick else 30
    start = time.perf_counter()
    for _ in range(updates):
        trainer.step()
    value = updates * OUR_ENVS / (time.perf_counter() - start)
    player.close()
    return [row(f"adversary training vs {player_name} (SB3 A2C, {SB3_ENVS} DummyVecEnv)",
                "steps/s", baseline, value, ">= 10x")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--player", default="state-transformer")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print_table(run(args.quick, args.player))
