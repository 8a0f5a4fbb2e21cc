"""stable-baselines3's VecEnv over the native batched env, for SB3's own algorithms.

The project's adversary trains with its own A2C loop (agents/a2c.py) on
`AdversarialVectorEnv` directly; this adapter lets SB3's algorithms and tools
drive the same env with one Python call per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from envs.game import Outcome
from envs.vector import AdversarialVectorEnv


class Sb3VecEnv(VecEnv):
    """stable-baselines3's VecEnv over an AdversarialVectorEnv (one Python call per batch)."""

    def __init__(self, vector_env: AdversarialVectorEnv):
        self.vector_env = vector_env
        super().__init__(vector_env.num_envs, vector_env.single_observation_space,
                         vector_env.single_action_space)
        self._actions: np.ndarray | None = None
        self.last_outcomes: list[Outcome] = []

    def reset(self) -> dict[str, np.ndarray]:
        seed = self._seeds[0] if self._seeds else None
        obs, _ = self.vector_env.reset(seed=seed)
        self._seeds = []
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[dict, np.ndarray, np.ndarray, list[dict]]:
        obs, rewards, done, _, infos = self.vector_env.step(self._actions)
        outcomes = infos["final_info"]["outcome"]
        self.last_outcomes = list(outcomes)
        final = infos["final_obs"]
        episode_infos = [
            {
                "terminal_observation": {k: v[i] for k, v in final.items()},
                "TimeLimit.truncated": False,
                "episode": {"r": outcomes[i].reward, "l": 1, "t": 0.0},
                "valid": outcomes[i].valid,
                "changed": outcomes[i].changed,
                "dropped": outcomes[i].dropped,
            }
            for i in range(self.num_envs)
        ]
        return obs, rewards.astype(np.float32), done, episode_infos

    def close(self) -> None:
        self.vector_env.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self.vector_env, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.vector_env, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        result = getattr(self.vector_env, method_name)(*args, **kwargs)
        return [result] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices: Any) -> Sequence[int]:
        if indices is None:
            return range(self.num_envs)
        return [indices] if isinstance(indices, int) else list(indices)
