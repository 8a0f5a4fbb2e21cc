"""What docs/game.md promises after a step holds for the single and the vector env: every key, plain values."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers clevr_game/Adversarial-v0)
from envs.game import Outcome
from players.oracle import OraclePlayer


def test_single_env_info_has_every_documented_key_as_plain_values():
    env = gym.make("clevr_game/Adversarial-v0", player=OraclePlayer())
    env.reset(seed=0)
    seen_valid = seen_invalid = False
    for step in range(40):
        action = env.action_space.sample()
        if step % 2:  # one object moved one bin: mostly valid
            action[:] = 3
            action[step % 2] = 4
        _, _, _, _, info = env.step(action)
        assert tuple(info) == Outcome.INFO_KEYS
        json.dumps(info)  # loggable as it is
        if info["valid"]:
            seen_valid = True
            assert info["reason"] == "" and isinstance(info["new_scene"], dict) and info["new_scene"]["objects"]
        else:
            seen_invalid = True
            assert info["reason"] and info["new_scene"] is None
        env.reset()
    assert seen_valid and seen_invalid
    env.close()


def test_vector_env_final_info_holds_the_same_keys_per_episode():
    env = gym.make_vec("clevr_game/Adversarial-v0", num_envs=16, player=OraclePlayer())
    env.reset(seed=1)
    _, rewards, _, _, infos = env.step(env.action_space.sample())
    final = infos["final_info"]
    assert set(Outcome.INFO_KEYS) <= set(final)
    for key in Outcome.INFO_KEYS:
        assert len(final[key]) == 16, key
    for i, outcome in enumerate(final["outcome"]):
        expected = outcome.info()
        for key in Outcome.INFO_KEYS:
            value = final[key][i]
            assert (value == expected[key]) if not isinstance(value, np.ndarray) else np.array_equal(value, expected[key])
        json.dumps({key: final[key][i] if not isinstance(final[key][i], np.bool_) else bool(final[key][i])
                    for key in Outcome.INFO_KEYS})
    assert isinstance(final["reason"][0], str) and isinstance(final["moves"][0], list)
    assert np.array_equal(final["valid"], [o.valid for o in final["outcome"]])
    env.close()
