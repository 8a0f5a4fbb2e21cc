"""`clevr-game play`: random (or stay) moves against a player, summarised as the game's metrics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.game import Outcome
from envs.items import ItemPool
from envs.moves import stay_actions
from envs.vector import AdversarialVectorEnv
from players.protocol import Player


@dataclass(frozen=True)
class Summary:
    episodes: int
    changed: int
    dropped: int
    invalid: int
    player_errors: int
    mean_reward: float
    first_error: str | None = None

    @property
    def counted(self) -> int:
        """Episodes the player answered: one whose answer failed is neither a flip nor a hold."""
        return self.episodes - self.player_errors

    @property
    def consistency(self) -> float:
        return self.changed / self.counted if self.counted else 0.0

    @property
    def drop(self) -> float:
        return self.dropped / self.counted if self.counted else 0.0

    @property
    def invalid_share(self) -> float:
        return self.invalid / self.episodes if self.episodes else 0.0

    def last_line(self) -> str:
        return f"consistency: {self.consistency:.4f} drop: {self.drop:.4f} invalid: {self.invalid_share:.4f}"


def summarise(outcomes: list[Outcome]) -> Summary:
    return Summary(
        episodes=len(outcomes),
        changed=sum(o.changed for o in outcomes),
        dropped=sum(o.dropped for o in outcomes),
        invalid=sum(not o.valid for o in outcomes),
        player_errors=sum(o.player_error is not None for o in outcomes),
        mean_reward=float(np.mean([o.reward for o in outcomes])) if outcomes else 0.0,
        first_error=next((o.player_error for o in outcomes if o.player_error), None),
    )


def play_moves(
    pool: ItemPool,
    player: Player,
    episodes: int,
    *,
    moves: str = "random",
    seed: int = 0,
    batch: int = 64,
    mode: str = "displacement",
) -> list[Outcome]:
    """`episodes` one-step episodes cycling through the pool, with random or `stay` moves."""
    if moves not in ("random", "stay"):
        raise ValueError(f"unknown moves {moves!r} (expected random or stay)")
    env = AdversarialVectorEnv(pool, player, num_envs=min(batch, max(episodes, 1)), order="cycle", mode=mode)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    outcomes: list[Outcome] = []
    while len(outcomes) < episodes:
        if moves == "random":
            actions = env.action_space.sample()
        else:
            actions = stay_actions(env.num_envs)
        _, _, _, _, infos = env.step(actions)
        outcomes.extend(infos["final_info"]["outcome"])
    return outcomes[:episodes]
