"""The native batched env: N items stepped at once with numpy, the player asked once per batch.

`AdversarialVectorEnv` is a gymnasium VectorEnv in same-step autoreset mode (every
episode is one step long, so each step ends all N episodes and starts N new ones):
the observation returned by `step` is already the next episode's, the finished
episodes' observations and outcomes are in `infos["final_obs"]` and
`infos["final_info"]`. `Sb3VecEnv` adapts it to stable-baselines3's VecEnv.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from stable_baselines3.common.vec_env import VecEnv

from envs.defaults import PlayerLike, default_items, default_player
from envs.game import Game, Outcome, Rewards
from envs.items import MAX_OBJECTS, ItemPool, ItemsLike
from envs.moves import DEFAULT_STEP, MoveSpace, action_space, random_heads
from envs.observation import encode, observation_space


class AdversarialVectorEnv(VectorEnv):
    """N parallel one-step episodes over an item pool.

    `order="random"` draws each episode's item uniformly (training);
    `order="cycle"` walks the pool in order, N at a time (evaluation: every item equally often).
    `items` and `player` are read as by `AdversarialSceneEnv` (folder, list or pool; Player
    or spec string; defaults: the shipped sample and the state transformer); this is the
    vector entry point of `gymnasium.make_vec("clevr_game/Adversarial-v0", num_envs=N)`.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        items: ItemsLike | None = None,
        player: PlayerLike | None = None,
        num_envs: int = 64,
        *,
        mode: str = "displacement",
        step: float = DEFAULT_STEP,
        rewards: Rewards | None = None,
        order: str = "random",
        rules: Any = None,
        game: Game | None = None,
        check_visibility: bool | None = None,
    ):
        pool = default_items(items)
        if order not in ("random", "cycle"):
            raise ValueError(f"unknown order {order!r} (expected random or cycle)")
        self._owns_player = False
        if game is None:
            player, self._owns_player = default_player(player)
        self.game = game or Game(pool, player, moves=MoveSpace(mode, step), rewards=rewards or Rewards(),
                                 rules=rules, check_visibility=check_visibility)
        self.num_envs = num_envs
        self.order = order
        self.single_observation_space = observation_space(pool)
        self.single_action_space = action_space()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._rng = np.random.default_rng()
        self._cursor = 0
        self._indices = np.zeros(num_envs, dtype=np.int64)
        self._heads = np.tile(np.arange(MAX_OBJECTS), (num_envs, 1))
        self._obs: dict[str, np.ndarray] = {}

    @property
    def pool(self) -> ItemPool:
        return self.game.pool

    def _start_episodes(self) -> dict[str, np.ndarray]:
        count = len(self.pool)
        if self.order == "random":
            self._indices = self._rng.integers(0, count, self.num_envs)
        else:
            self._indices = (self._cursor + np.arange(self.num_envs)) % count
            self._cursor = int((self._cursor + self.num_envs) % count)
        self._heads = random_heads(self._rng, self.num_envs)
        self._obs = encode(self.pool, self._indices, self._heads)
        return self._obs

    @property
    def current_items(self) -> np.ndarray:
        """(N,) pool indices of the episodes now running."""
        return self._indices

    @property
    def current_heads(self) -> np.ndarray:
        """(N, 10) head -> object slot assignments of the episodes now running."""
        return self._heads

    def get_state(self) -> dict:
        """Everything that decides the next episodes, for a checkpoint."""
        return {"rng": self._rng.bit_generator.state, "cursor": self._cursor,
                "indices": self._indices.copy(), "heads": self._heads.copy()}

    def set_state(self, state: dict) -> None:
        self._rng = np.random.default_rng()
        self._rng.bit_generator.state = state["rng"]
        self._cursor = int(state["cursor"])
        self._indices = np.asarray(state["indices"], dtype=np.int64)
        self._heads = np.asarray(state["heads"], dtype=np.int64)
        self._obs = encode(self.pool, self._indices, self._heads)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._cursor = 0
        obs = self._start_episodes()
        return obs, {"item_index": self._indices.copy()}

    def play(self, actions: np.ndarray) -> list[Outcome]:
        """The current episodes' outcomes, without starting new ones."""
        return self.game.play(self._indices, self._heads, np.asarray(actions, dtype=np.int64))

    def step(self, actions: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray, dict]:
        final_obs = self._obs
        outcomes = self.play(actions)
        table = np.array([(o.reward, o.valid, o.changed, o.dropped) for o in outcomes], dtype=np.float64)
        outcome_array = np.empty(len(outcomes), dtype=object)
        outcome_array[:] = outcomes
        done = np.ones(self.num_envs, dtype=bool)
        finished = self._indices.copy()
        obs = self._start_episodes()
        infos = {
            "final_obs": final_obs,
            "final_info": {
                "outcome": outcome_array,
                "valid": table[:, 1] > 0,
                "changed": table[:, 2] > 0,
                "dropped": table[:, 3] > 0,
                "item_index": finished,
            },
        }
        rewards = table[:, 0]
        return obs, rewards, done, np.zeros(self.num_envs, dtype=bool), infos

    def close_extras(self, **kwargs: Any) -> None:
        # A player passed in belongs to the caller, who closes it; one made from a spec is ours.
        if self._owns_player:
            self.game.player.close()
            self._owns_player = False


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
