"""Both players as agents of one PettingZoo AEC environment, for co-training a learning VQA player.

A round: the `adversary` moves objects of one item's scene (the action and
observation of the single-player env), the game judges the move, and, when it is
valid, the `vqa_player` answers the question on the moved scene by choosing an
index into `ANSWER_VALUES`.

Rewards (the game's, with the learning player's answer as the new answer):
- an invalid move ends the round: the adversary gets isr, the VQA player 0 and no turn;
- otherwise the VQA player gets `right` (+1) for the true answer, `wrong` (-1) else;
  the adversary gets dr when the answer is wrong and fr when it is right. The old
  answer is taken to be the true answer: a player in training has no fixed answer on
  the original scene to compare with, so breaking the question is what counts (cr,
  a change of an already wrong answer, does not arise).

An episode is `rounds` rounds, each on an item drawn with the env's seed; CLEVR items
only (CLEVR-POC answers are sets, which one Discrete choice cannot express). After a
round, both agents' infos hold its outcome (verdicts, answers, moves, new scene).
`items` is read as by the single env: an item folder (str or Path), a list of
Items or an ItemPool, the shipped sample when not given. There is no `player`
argument: the VQA player is the second agent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from clevr_game.errors import InputError
from clevr_game.vocab import CLEVR_POC
from envs.defaults import default_items
from envs.game import Game, Judged, Outcome, Rewards
from envs.items import MAX_OBJECTS, ItemPool, ItemsLike
from envs.moves import ACTION_DIMS, DEFAULT_STEP, NUM_BINS, MoveSpace, action_space, random_heads
from envs.observation import encode, observation_space
from players.protocol import Answer

ADVERSARY = "adversary"
VQA_PLAYER = "vqa_player"
ANSWER_VALUES: tuple[str, ...] = CLEVR_POC.answer_values
"""The VQA player's actions: CLEVR-POC's answer list extends CLEVR's and is the state players' output order."""


class TwoPlayerEnv(AECEnv):
    """Agents `adversary` then `vqa_player`, round after round; see the module docstring."""

    metadata = {"name": "clevr_game_two_player_v0", "render_modes": [], "is_parallelizable": False}

    def __init__(
        self,
        items: ItemsLike | None = None,
        *,
        rounds: int = 1,
        mode: str = "displacement",
        step: float = DEFAULT_STEP,
        rewards: Rewards | None = None,
        right: float = 1.0,
        wrong: float = -1.0,
        seed: int | None = None,
    ):
        super().__init__()
        pool = default_items(items)
        if any(it.environment is not None for it in pool.items):
            raise InputError("two-player env: CLEVR-POC items have set answers; use CLEVR items")
        unknown = next((it for it in pool.items if it.answer not in ANSWER_VALUES), None)
        if unknown is not None:
            raise InputError(f"two-player env: item {unknown.item_id}: answer {unknown.answer!r} is not an answer value")
        if rounds < 1:
            raise InputError(f"two-player env: rounds must be at least 1, got {rounds}")
        # No player inside the game: the learning VQA player's answer is scored directly.
        self.game = Game(pool, None, moves=MoveSpace(mode, step), rewards=rewards or Rewards())
        self.rounds = rounds
        self.right, self.wrong = right, wrong
        self.possible_agents = [ADVERSARY, VQA_PLAYER]
        self.observation_spaces = {agent: observation_space(pool) for agent in self.possible_agents}
        self.action_spaces = {
            ADVERSARY: action_space(),
            VQA_PLAYER: spaces.Discrete(len(ANSWER_VALUES)),
        }
        self._rng = np.random.default_rng(seed)
        self._scene_order = np.arange(MAX_OBJECTS)[None]
        self._index = 0
        self._round = 0
        self._heads = np.arange(MAX_OBJECTS)
        self._pending: Judged | None = None
        self._observations: dict[str, dict[str, np.ndarray]] = {}
        self.agents: list[str] = []

    @property
    def pool(self) -> ItemPool:
        return self.game.pool

    @property
    def current_item_id(self) -> str:
        """The item of the round being played (infos after a round describe the round just finished)."""
        return self.pool.items[self._index].item_id

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ rounds

    def _start_round(self, item: int | None = None) -> None:
        self._index = int(self._rng.integers(len(self.pool))) if item is None else item
        self._heads = random_heads(self._rng, 1)[0]
        self._pending = None
        index = np.array([self._index])
        self._observations = {
            ADVERSARY: _first(encode(self.pool, index, self._heads[None])),
            # The VQA player sees objects in scene order (no head permutation to undo).
            VQA_PLAYER: _first(encode(self.pool, index, self._scene_order)),
        }
        self.agent_selection = ADVERSARY

    def _end_round(self) -> None:
        self._round += 1
        if self._round >= self.rounds:
            self.terminations = dict.fromkeys(self.agents, True)
            self.agent_selection = ADVERSARY
        else:
            self._start_round()

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """A new episode; `options={"item": i}` fixes the first round's item."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        item = (options or {}).get("item")
        if item is not None and not 0 <= int(item) < len(self.pool):
            raise InputError(f"two-player env: item {item} outside 0..{len(self.pool) - 1}")
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {} for agent in self.agents}
        self._round = 0
        self._start_round(None if item is None else int(item))
        self.infos = {agent: {"item_id": self.current_item_id, "round": 0} for agent in self.agents}

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        return self._observations[agent]

    # ------------------------------------------------------------------ turns

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        if agent == ADVERSARY:
            self._move(action)
        else:
            self._answer(action)
        self._accumulate_rewards()

    def _move(self, action: Any) -> None:
        bins = np.asarray(action, dtype=np.int64).reshape(-1)
        if bins.shape != (ACTION_DIMS,) or bins.min() < 0 or bins.max() >= NUM_BINS:
            raise InputError(f"adversary action must be {ACTION_DIMS} bins in 0..{NUM_BINS - 1}, got {action!r}")
        judged = self.game.judge(np.array([self._index]), self._heads[None], bins[None])
        item = self.pool.items[self._index]
        if not judged.valid[0]:
            outcome = self.game.score(judged, [self._truth()], [None])[0]
            self.rewards[ADVERSARY] = outcome.reward  # isr; the VQA player gets nothing and no turn
            self._set_infos(outcome)
            self._end_round()
            return
        self._pending = judged
        self._observations[VQA_PLAYER] = _first(encode(self.pool, judged.indices, self._scene_order, judged.moved))
        self.infos[ADVERSARY] = {"item_id": item.item_id, "valid": True, "moves": judged.moves(0)}
        self.agent_selection = VQA_PLAYER

    def _answer(self, action: Any) -> None:
        choice = int(action)
        if not 0 <= choice < len(ANSWER_VALUES):
            raise InputError(f"vqa_player action must be in 0..{len(ANSWER_VALUES) - 1}, got {action!r}")
        judged, item = self._pending, self.pool.items[self._index]
        assert judged is not None, "the VQA player answers only after a valid move"
        # The game's own reward rule, with the true answer as the old one and the learning player's as the new.
        outcome = self.game.score(judged, [self._truth()], [Answer(item.item_id, ANSWER_VALUES[choice])])[0]
        self.rewards[ADVERSARY] = outcome.reward
        self.rewards[VQA_PLAYER] = self.right if outcome.new_answer == item.answer else self.wrong
        self._set_infos(outcome)
        self._end_round()

    def _truth(self) -> Answer:
        item = self.pool.items[self._index]
        return Answer(item.item_id, item.answer)

    def _set_infos(self, outcome: Outcome) -> None:
        info = outcome.info()
        for agent in self.agents:
            self.infos[agent] = dict(info, round=self._round)


def _first(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {key: value[0] for key, value in batch.items()}
