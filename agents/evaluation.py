"""Per-item results of an adversary on a mini-game: consistency, drop, best manipulation.

The final adversary makes one move per item, `samples` times over (its policy
sampled, with fresh head assignments). Consistency is the share of items whose
answer one such move changed with a valid scene, averaged over the samples; drop
the share answered right before and wrong after. A move the player failed to
answer (an error answer) is neither: it is left out of both shares and counted in
`player_errors`; an item none of whose moves got an answer is left out of the means. The random adversary is
measured with the same number of samples on the same items, and so is the random
*valid* adversary (`random_valid_actions`: a random move of one or two objects,
drawn again until every referee accepts it). Per item, `changed` and `dropped`
also say whether any sample did, and the best manipulation is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from clevr_game.asp.metrics import jaccard
from clevr_game.programs import Program
from envs.game import Game, Outcome
from envs.moves import ACTION_DIMS, NUM_BINS, STAY_BIN, random_heads, stay_actions
from players.protocol import SET_SEPARATOR

ActionSource = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(B,) item indices and (B, 10) head assignments -> (B, 20) actions."""


@dataclass
class ItemResult:
    item_id: str
    true_answer: str
    old_answer: str | None
    tries: int
    valid: int
    changed: bool
    dropped: bool
    best: Outcome | None
    changed_share: float = 0.0
    dropped_share: float = 0.0
    player_errors: int = 0
    family: int | None = None
    """The question's `question_family_index` (its template), None when the item has none."""
    question_kind: str | None = None
    """What the question asks, from its program's last step: count, exist, compare or query."""
    valid_moves: list[Outcome] = field(default_factory=list, repr=False)
    jaccard_loss: float | None = None
    """Set answers (CLEVR-POC): the mean over counted moves of how much the answer's Jaccard index with
    the true set fell (J(old, true) - J(new, true); an invalid move loses nothing). None for CLEVR items."""
    queries: int = 0
    """Moves whose moved scene the player was asked about (valid and moved)."""

    def to_json(self) -> dict:
        best = None
        if self.best is not None:
            best = {
                "moves": self.best.moves,
                "new_answer": self.best.new_answer,
                "scene": self.best.new_scene.to_json() if self.best.new_scene is not None else None,
            }
        return {
            "item_id": self.item_id, "true_answer": self.true_answer, "old_answer": self.old_answer,
            "tries": self.tries, "valid": self.valid, "changed": self.changed, "dropped": self.dropped,
            "changed_share": self.changed_share, "dropped_share": self.dropped_share,
            "player_errors": self.player_errors, "queries": self.queries,
            "family": self.family, "question_kind": self.question_kind,
            "best_manipulation": best,
            **({"jaccard_loss": self.jaccard_loss} if self.jaccard_loss is not None else {}),
        }

    @property
    def counted(self) -> int:
        """Moves whose outcome counts: the player answered (or the scene was invalid)."""
        return self.tries - self.player_errors

    @property
    def scored(self) -> bool:
        """Whether the item's shares mean anything: every one of its moves got an answer.

        An errored move could have been a flip, so an item with one is unscored, not unchanged.
        """
        return self.player_errors == 0 and self.tries > 0


@dataclass(frozen=True)
class Scores:
    consistency: float
    drop: float
    invalid: float
    clean_accuracy: float
    player_errors: int = 0
    items_counted: int = 0
    """Scored items: those the means are over."""
    jaccard_loss: float | None = None
    """Set answers only: the mean over items of ItemResult.jaccard_loss."""
    queries: int = 0
    """Moved scenes the player was asked about; `player_errors` of them failed."""
    unscored_items: int = 0
    """Items left out of the means because a move of theirs got no answer."""

    @property
    def error_rate(self) -> float:
        """The evaluation's own error share: failed answers over the moved scenes asked about."""
        return self.player_errors / self.queries if self.queries else 0.0

    def failure(self, max_error_rate: float, what: str = "evaluation") -> str | None:
        """Why these scores cannot stand (one line), or None.

        Too many of the evaluation's own queries failed, or no item could be scored.
        """
        if self.queries and self.error_rate > max_error_rate:
            return (f"{what}: {self.player_errors} of {self.queries} queries on moved scenes failed "
                    f"({self.error_rate:.1%}, above --max-error-rate {max_error_rate:g}); "
                    f"{self.unscored_items} items unscored")
        if self.items_counted == 0 and self.unscored_items:
            return f"{what}: none of its {self.unscored_items} items could be scored (every one had a failed answer)"
        return None

    def to_json(self) -> dict:
        return {"consistency": self.consistency, "drop": self.drop, "invalid": self.invalid,
                "clean_accuracy": self.clean_accuracy, "eval_player_errors": self.player_errors,
                "eval_queries": self.queries, "items_counted": self.items_counted,
                "unscored_items": self.unscored_items,
                **({"jaccard_loss": self.jaccard_loss} if self.jaccard_loss is not None else {})}


def _better(candidate: Outcome, best: Outcome | None) -> bool:
    rank = 2 if candidate.dropped else (1 if candidate.changed else 0)
    best_rank = 0 if best is None else (2 if best.dropped else (1 if best.changed else 0))
    return rank > best_rank


def evaluate(
    game: Game, indices: list[int], actions_for: ActionSource, samples: int, seed: int
) -> list[ItemResult]:
    """Play `samples` moves per item with fresh random head assignments; summarise per item."""
    rng = np.random.default_rng(seed)
    repeated = np.repeat(np.asarray(indices, dtype=np.int64), samples)
    heads = random_heads(rng, len(repeated))
    outcomes = game.play(repeated, heads, actions_for(repeated, heads))
    results = []
    for k, index in enumerate(indices):
        item = game.pool.items[index]
        mine = outcomes[k * samples:(k + 1) * samples]
        best = None
        for outcome in mine:
            if outcome.valid and _better(outcome, best):
                best = outcome
        errors = sum(not o.counted for o in mine)
        counted = samples - errors
        loss = None
        if item.environment is not None and counted:
            loss = sum(jaccard_loss(o) for o in mine if o.counted) / counted
        results.append(ItemResult(
            item.item_id, item.answer, mine[0].old_answer, samples, sum(o.valid for o in mine),
            any(o.changed for o in mine), any(o.dropped for o in mine), best,
            changed_share=sum(o.changed for o in mine) / counted if counted else 0.0,
            dropped_share=sum(o.dropped for o in mine) / counted if counted else 0.0,
            player_errors=errors,
            family=item.family, question_kind=question_kind(item.program),
            valid_moves=[o for o in mine if o.valid and o.moves and o.counted],
            jaccard_loss=loss,
            queries=sum(bool(o.valid and o.moves) for o in mine),
        ))
    return results


def jaccard_loss(outcome: Outcome) -> float:
    """How much one answered move lowered a set answer's Jaccard index with the true set (0 if invalid)."""
    if not outcome.valid or outcome.old_answer is None or outcome.new_answer is None:
        return 0.0
    truth = outcome.true_answer.split(SET_SEPARATOR)
    return (jaccard(outcome.old_answer.split(SET_SEPARATOR), truth)
            - jaccard(outcome.new_answer.split(SET_SEPARATOR), truth))


_COMPARISONS = ("equal_", "less_than", "greater_than")


def question_kind(program: Program) -> str | None:
    """`count`, `exist`, `compare` or `query`, by the program's last function (None for an empty program)."""
    if not program:
        return None
    last = program[-1].function
    if last in ("count", "exist"):
        return last
    if last.startswith(_COMPARISONS):
        return "compare"
    return "query"


def scores(results: list[ItemResult]) -> Scores:
    """Means over the scored items (no failed answer); invalid share over every move."""
    counted = [r for r in results if r.scored]
    n = len(counted) or 1
    tries = sum(r.tries for r in results) or 1
    losses = [r.jaccard_loss for r in counted if r.jaccard_loss is not None]
    return Scores(
        consistency=sum(r.changed_share for r in counted) / n,
        drop=sum(r.dropped_share for r in counted) / n,
        invalid=1.0 - sum(r.valid for r in results) / tries,
        clean_accuracy=sum(r.old_answer == r.true_answer for r in results) / (len(results) or 1),
        player_errors=sum(r.player_errors for r in results),
        items_counted=len(counted),
        jaccard_loss=sum(losses) / len(losses) if losses else None,
        queries=sum(r.queries for r in results),
        unscored_items=len(results) - len(counted),
    )


def random_actions(seed: int) -> ActionSource:
    rng = np.random.default_rng(seed)
    return lambda indices, heads: rng.integers(0, NUM_BINS, (len(indices), ACTION_DIMS))


RANDOM_VALID_TRIES = 64
"""Candidates drawn per move before the random valid adversary gives up on an item (its move then stays invalid)."""

_MOVING_BIN_PAIRS = np.array([(x, y) for x in range(NUM_BINS) for y in range(NUM_BINS)
                              if (x, y) != (STAY_BIN, STAY_BIN)], dtype=np.int64)
"""The (x, y) bins that move an object: every pair but stay-stay."""


def random_valid_actions(game: Game, seed: int, tries: int = RANDOM_VALID_TRIES) -> ActionSource:
    """Random moves of one or two objects, each drawn again until the game's referees accept it.

    Per move: one or two distinct objects (one when the scene has one), each moved
    by a uniform pair of displacement bins other than stay-stay. Candidates are
    judged with `Game.judge_moves`, which asks the player nothing, so this baseline
    costs the same queries as the random one. A move with no accepted candidate
    after `tries` draws keeps its last candidate and is played as the invalid move
    it is.
    """
    if tries < 1:
        raise ValueError(f"tries={tries}: must be at least 1")
    if game.moves.mode != "displacement":
        raise ValueError(f"the random valid adversary moves objects by displacement bins, not {game.moves.mode!r}")
    rng = np.random.default_rng(seed)

    def actions_for(indices: np.ndarray, heads: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices, dtype=np.int64)
        actions = stay_actions(len(indices))
        pending = np.arange(len(indices))
        for _ in range(tries):
            candidates = _one_or_two_moved(rng, game.pool.num_objects[indices[pending]], heads[pending])
            actions[pending] = candidates
            accepted = game.judge_moves(indices[pending], heads[pending], candidates)
            pending = pending[~accepted]
            if not len(pending):
                break
        return actions

    return actions_for


def _one_or_two_moved(rng: np.random.Generator, num_objects: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """(B, 20) actions moving one or two random objects of each scene by non-stay bins."""
    actions = stay_actions(len(num_objects))
    for row, n in enumerate(num_objects.tolist()):
        count = 1 if n < 2 else int(rng.integers(1, 3))
        for obj in rng.choice(n, count, replace=False).tolist():
            head = int(np.flatnonzero(heads[row] == obj)[0])  # head h moves object heads[h]
            actions[row, 2 * head:2 * head + 2] = _MOVING_BIN_PAIRS[rng.integers(len(_MOVING_BIN_PAIRS))]
    return actions


def moved_objects(moves: list) -> int:
    """How many objects a manipulation moved (`moves`: (object, dx, dy) per moved object)."""
    return sum(1 for _, dx, dy in moves if dx or dy)


def total_displacement(moves: list) -> float:
    """The summed length of every object's move, in scene units (a one-bin move is 0.3)."""
    return float(round(sum(float(np.hypot(dx, dy)) for _, dx, dy in moves), 6))
