"""A black-box search adversary: try moves until the player's answer flips, within a query budget.

Strategies:
- `random`: random moves of the whole scene;
- `greedy`: one object at a time, every one of its 48 non-stay displacements;
- `exhaustive`: every joint move, for scenes small enough that 49^n fits the budget;
  finishing without a flip is a certificate that the player is robust on that item
  under every move of the action space.
The budget counts player queries (valid scenes shown to the player); invalid
candidates cost no query. Candidates are played in batches through the game.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from envs.game import Game, Outcome
from envs.items import MAX_OBJECTS
from envs.moves import ACTION_DIMS, NUM_BINS, STAY_BIN, stay_actions

SINGLE_OBJECT_MOVES = [(bx, by) for bx in range(NUM_BINS) for by in range(NUM_BINS) if (bx, by) != (STAY_BIN, STAY_BIN)]


@dataclass
class SearchResult:
    item_id: str
    queries: int
    candidates: int
    flipped: Outcome | None
    certified_robust: bool
    player_errors: int = 0
    """Candidates whose answer failed: a search that met one and found no flip proves nothing."""

    @property
    def scored(self) -> bool:
        """A flip found, or a search whose every candidate got an answer (a failed one could have been the flip)."""
        return self.flipped is not None or self.player_errors == 0

    def to_json(self) -> dict:
        return {
            "item_id": self.item_id, "queries": self.queries, "candidates": self.candidates,
            "flipped": self.flipped is not None, "dropped": bool(self.flipped and self.flipped.dropped),
            "certified_robust": self.certified_robust, "player_errors": self.player_errors,
            "moves": self.flipped.moves if self.flipped else None,
        }


def _stay() -> np.ndarray:
    return stay_actions(1)[0]


def _greedy(n: int) -> Iterator[np.ndarray]:
    for obj in range(n):
        for bx, by in SINGLE_OBJECT_MOVES:
            action = _stay()
            action[2 * obj], action[2 * obj + 1] = bx, by
            yield action


def _exhaustive(n: int) -> Iterator[np.ndarray]:
    for combo in itertools.product(range(NUM_BINS * NUM_BINS), repeat=n):
        if all(c == STAY_BIN * NUM_BINS + STAY_BIN for c in combo):
            continue
        action = _stay()
        for obj, c in enumerate(combo):
            action[2 * obj], action[2 * obj + 1] = divmod(c, NUM_BINS)
        yield action


def _random(rng: np.random.Generator) -> Iterator[np.ndarray]:
    while True:
        yield rng.integers(0, NUM_BINS, ACTION_DIMS)


class SearchAdversary:
    def __init__(self, game: Game, budget: int = 200, strategy: str = "greedy", batch: int = 64,
                 seed: int = 0, max_candidates: int | None = None):
        if strategy not in ("random", "greedy", "exhaustive"):
            raise ValueError(f"unknown search strategy {strategy!r} (expected random, greedy or exhaustive)")
        self.game, self.budget, self.strategy, self.batch = game, budget, strategy, batch
        self.rng = np.random.default_rng(seed)
        self.max_candidates = max_candidates or 50 * budget

    def exhaustive_fits(self, n: int) -> bool:
        return NUM_BINS ** (2 * n) - 1 <= self.max_candidates

    def attack(self, index: int) -> SearchResult:
        item = self.game.pool.items[index]
        n = len(item.scene)
        strategy = self.strategy
        if strategy == "exhaustive" and not self.exhaustive_fits(n):
            strategy = "greedy"  # too many joint moves: fall back, and certify nothing
        source = {"greedy": lambda: _greedy(n), "exhaustive": lambda: _exhaustive(n),
                  "random": lambda: _random(self.rng)}[strategy]()
        heads = np.arange(MAX_OBJECTS)[None]  # identity: head k moves object k
        queries = candidates = errors = 0
        exhausted = False
        while queries < self.budget and candidates < self.max_candidates:
            # No chunk larger than the budget left: every valid candidate is a player query.
            chunk = list(itertools.islice(source, min(self.batch, self.budget - queries)))
            if not chunk:
                exhausted = True
                break
            candidates += len(chunk)
            outcomes = self.game.play(np.full(len(chunk), index), np.repeat(heads, len(chunk), 0), np.stack(chunk))
            queries += sum(o.valid and bool(o.moves) for o in outcomes)
            errors += sum(not o.counted for o in outcomes)
            flipped = next((o for o in outcomes if o.changed), None)
            if flipped is not None:
                return SearchResult(item.item_id, queries, candidates, flipped, False, errors)
        # A failed answer may have hidden the flip: nothing is certified past one.
        certified = strategy == "exhaustive" and exhausted and errors == 0
        return SearchResult(item.item_id, queries, candidates, None, certified, errors)
