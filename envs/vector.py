"""The native batched env: N items stepped at once with numpy, the player asked once per batch.

`AdversarialVectorEnv` is a gymnasium VectorEnv in same-step autoreset mode (every
episode is one step long, so each step ends all N episodes and starts N new ones):
the observation returned by `step` is already the next episode's, the finished
episodes' observations and outcomes are in `infos["final_obs"]` and
`infos["final_info"]`. `agents.sb3_vec_env.Sb3VecEnv` adapts it to
stable-baselines3's VecEnv.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from envs.defaults import PlayerLike, default_items, default_player
from envs.game import Game, Outcome, Outcomes, Rewards
from envs.items import MAX_OBJECTS, ItemPool, ItemsLike
from envs.moves import DEFAULT_STEP, MoveSpace, action_space, random_heads
from envs.observation import encode, observation_space


class FinalInfo(Mapping[str, Any]):
    """A vector step's `final_info`: every key of the single env's info as an array over the N episodes.

    `valid`, `changed`, `dropped` (bool arrays), `item_index` (pool indices) and
    `outcome` (an `Outcomes` sequence) are there at once; the others (`item_id`,
    `reason`, `verdicts`, `true_answer`, `old_answer`, `new_answer`, `moves`,
    `new_scene`, `player_error`: object arrays of the same plain values) are built
    on first read, so a training loop that reads only the flags pays nothing for them.
    """

    def __init__(self, outcomes: Outcomes, item_index: np.ndarray):
        self._outcomes = outcomes
        self._values: dict[str, Any] = {"outcome": outcomes, "valid": outcomes.valid, "changed": outcomes.changed,
                                        "dropped": outcomes.dropped, "item_index": item_index}
        self._infos: list[dict] | None = None

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            if key not in Outcome.INFO_KEYS:
                raise KeyError(key)
            if self._infos is None:
                self._infos = [outcome.info() for outcome in self._outcomes]
            column = np.empty(len(self._infos), dtype=object)  # filled one by one: lists must stay lists
            for row, info in enumerate(self._infos):
                column[row] = info[key]
            self._values[key] = column
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(("outcome", "item_index", *Outcome.INFO_KEYS))

    def __len__(self) -> int:
        return len(Outcome.INFO_KEYS) + 2


@dataclass(frozen=True)
class Episodes:
    """The episodes a vector env is running: what an observation is of.

    `items` (N,) are pool indices, `heads` (N, 10) the head -> object slot
    assignments and `observation` the batched observation of these episodes. An
    adversary that keeps per-item features (agents.features) looks them up by
    items and heads; one whose features change reads the observation.
    """

    items: np.ndarray
    heads: np.ndarray
    observation: dict[str, np.ndarray]


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
    def episodes(self) -> Episodes:
        """The episodes now running (copies: the next step starts new ones)."""
        return Episodes(self._indices.copy(), self._heads.copy(), self._obs)

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

    def play(self, actions: np.ndarray) -> Outcomes:
        """The current episodes' outcomes, without starting new ones."""
        return self.game.play(self._indices, self._heads, np.asarray(actions, dtype=np.int64))

    def step(self, actions: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray, dict]:
        final_obs = self._obs
        outcomes = self.play(actions)
        done = np.ones(self.num_envs, dtype=bool)
        finished = self._indices.copy()
        obs = self._start_episodes()
        infos = {"final_obs": final_obs, "final_info": FinalInfo(outcomes, finished)}
        return obs, outcomes.rewards, done, np.zeros(self.num_envs, dtype=bool), infos

    def close_extras(self, **kwargs: Any) -> None:
        # A player passed in belongs to the caller, who closes it; one made from a spec is ours.
        if self._owns_player:
            self.game.player.close()
            self._owns_player = False
