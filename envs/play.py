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
    """The game's metrics over played episodes, with the mini-game's rule for failed answers.

    An item any of whose episodes got no answer from the player is *unscored*: all
    its episodes leave the shares, since an error could have hidden a flip (a player
    that fails exactly when it is fooled must not look robust). Consistency and drop
    are over the scored items' episodes; the invalid share over every episode; the
    clean accuracy over the distinct items played (an unanswered original is wrong).
    """

    episodes: int
    changed: int
    dropped: int
    invalid: int
    player_errors: int
    mean_reward: float
    first_error: str | None = None
    scored_episodes: int = 0
    items: int = 0
    unscored_items: int = 0
    correct_items: int = 0

    @property
    def counted(self) -> int:
        """Episodes the shares are over: those of the scored items."""
        return self.scored_episodes

    @property
    def consistency(self) -> float:
        return self.changed / self.counted if self.counted else 0.0

    @property
    def drop(self) -> float:
        return self.dropped / self.counted if self.counted else 0.0

    @property
    def invalid_share(self) -> float:
        return self.invalid / self.episodes if self.episodes else 0.0

    @property
    def accuracy(self) -> float:
        return self.correct_items / self.items if self.items else 0.0

    @property
    def error_rate(self) -> float:
        """The share of episodes whose answer (on the moved scene, or the original's) failed."""
        return self.player_errors / self.episodes if self.episodes else 0.0

    def failure(self, max_error_rate: float) -> str | None:
        """Why the summary cannot stand (one line), or None."""
        if self.episodes and self.error_rate > max_error_rate:
            return (f"{self.player_errors} of {self.episodes} episodes got no answer "
                    f"({self.error_rate:.1%}, above --max-error-rate {max_error_rate:g}); "
                    f"{self.unscored_items} of {self.items} items unscored; first error: {self.first_error}")
        if self.items and self.unscored_items == self.items:
            return f"none of the {self.items} items could be scored; first error: {self.first_error}"
        return None

    def last_line(self) -> str:
        """`consistency: C drop: D invalid: I [unscored: U] accuracy: A`."""
        line = f"consistency: {self.consistency:.4f} drop: {self.drop:.4f} invalid: {self.invalid_share:.4f}"
        if self.unscored_items:
            line += f" unscored: {self.unscored_items}"
        return line + f" accuracy: {self.accuracy:.4f}"


def summarise(outcomes: list[Outcome]) -> Summary:
    unscored = {o.item_id for o in outcomes if o.player_error is not None}
    scored = [o for o in outcomes if o.item_id not in unscored]
    first_seen: dict[str, Outcome] = {}
    for o in outcomes:
        first_seen.setdefault(o.item_id, o)
    return Summary(
        episodes=len(outcomes),
        changed=sum(o.changed for o in scored),
        dropped=sum(o.dropped for o in scored),
        invalid=sum(not o.valid for o in outcomes),
        player_errors=sum(o.player_error is not None for o in outcomes),
        mean_reward=float(np.mean([o.reward for o in outcomes])) if outcomes else 0.0,
        first_error=next((o.player_error for o in outcomes if o.player_error), None),
        scored_episodes=len(scored),
        items=len(first_seen),
        unscored_items=len(unscored),
        correct_items=sum(o.old_answer == o.true_answer for o in first_seen.values()),
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
