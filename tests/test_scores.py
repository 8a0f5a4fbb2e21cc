"""The published figures of an attack: consistency, drop, invalid share, clean accuracy and the rewards.

Every number is computed by hand from a real Game on a small generated pool and a
scripted player (the input under test, not a stand-in for a component): the player
answers by one rule of the scene it is shown, whether object 0 was moved. Each item
is given a behaviour, so right-before-wrong-after (a drop) and the other changes
(wrong before, changed after: consistency only) are told apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from agents.evaluation import evaluate, scores
from clevr_game.generate import generate_dataset
from envs.game import Game, Rewards
from envs.items import MAX_OBJECTS, ItemPool, load_items
from envs.moves import NUM_BINS, STAY_BIN
from players.oracle import OraclePlayer
from players.protocol import Answer, Player, Query

RIGHT, WRONG, OTHER_WRONG, ERROR = "right", "wrong", "other wrong", "error"

# Per behaviour: (answer on the original scene, answer once object 0 moved).
BEHAVIOURS = {
    "broken": (RIGHT, WRONG),  # the adversary's aim: a drop (and a change)
    "wrong, changed": (WRONG, OTHER_WRONG),  # a change, but no drop: it was wrong before
    "wrong, fixed": (WRONG, RIGHT),  # a change to the right answer: no drop either
    "robust": (RIGHT, RIGHT),
    "always wrong": (WRONG, WRONG),
}


@dataclass(frozen=True)
class Case:
    """A pool item with a valid move of object 0 and an invalid move, both in object order."""

    index: int
    move: np.ndarray  # (20,) bins: only object 0 moves and the scene stays valid
    invalid: np.ndarray  # (20,) bins: the referees reject the scene


def _stay() -> np.ndarray:
    return np.full(2 * MAX_OBJECTS, STAY_BIN, dtype=np.int64)


def _single_object_moves(objects: int) -> list[np.ndarray]:
    moves = []
    for obj in range(objects):
        for bx in range(NUM_BINS):
            for by in range(NUM_BINS):
                if (bx, by) != (STAY_BIN, STAY_BIN):
                    action = _stay()
                    action[2 * obj], action[2 * obj + 1] = bx, by
                    moves.append(action)
    return moves


def _find_cases(pool: ItemPool, wanted: int) -> list[Case]:
    """Items where some move of object 0 is valid and some single-object move is not (the oracle referees)."""
    game = Game(pool, OraclePlayer())
    cases = []
    for index in range(len(pool)):
        moves = _single_object_moves(int(pool.num_objects[index]))
        outcomes = game.play(np.full(len(moves), index), np.tile(np.arange(MAX_OBJECTS), (len(moves), 1)),
                             np.array(moves))
        valid = [m for m, o in zip(moves, outcomes, strict=True) if o.valid and {obj for obj, _, _ in o.moves} == {0}]
        invalid = [m for m, o in zip(moves, outcomes, strict=True) if not o.valid]
        if valid and invalid:
            cases.append(Case(index, valid[0], invalid[0]))
        if len(cases) == wanted:
            return cases
    raise AssertionError(f"only {len(cases)} of {len(pool)} generated items have a valid and an invalid move")


class ObjectZeroPlayer(Player):
    """Answers each item by its behaviour: one answer while object 0 is where it was, another once moved."""

    needs = frozenset({"scene"})
    name = "object-zero"

    def __init__(self, pool: ItemPool, behaviours: dict[str, tuple[str, str]]):
        self.behaviours = behaviours
        self.origin = {item.item_id: np.array(item.scene.objects[0].coords[:2]) for item in pool.items}
        self.answers = {item.item_id: _answer_texts(item.answer, item.scene.vocabulary.answer_values)
                        for item in pool.items}

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers = []
        for query in queries:
            before, after = self.behaviours[query.item_id]
            moved = not np.allclose(query.scene.objects[0].coords[:2], self.origin[query.item_id])
            kind = after if moved else before
            if kind == ERROR:
                answers.append(Answer.failed(query.item_id, f"{self.name}: scripted failure"))
            else:
                answers.append(Answer(query.item_id, self.answers[query.item_id][kind]))
        return answers


def _answer_texts(true_answer: str, vocabulary: Sequence[str]) -> dict[str, str]:
    wrong = [value for value in vocabulary if value != true_answer]
    return {RIGHT: true_answer, WRONG: wrong[0], OTHER_WRONG: wrong[1]}


def _in_head_order(object_actions: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """(20,) bins by object -> (20,) bins by head, for heads[h] = the object head h moves."""
    pairs = object_actions.reshape(MAX_OBJECTS, 2)
    return pairs[heads].reshape(-1)


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> ItemPool:
    folder: Path = tmp_path_factory.mktemp("items")
    generate_dataset(folder, 12, 1, seed=11, progress=False)
    return ItemPool(load_items(folder))


@pytest.fixture(scope="module")
def cases(pool: ItemPool) -> list[Case]:
    return _find_cases(pool, 6)


def _behaviours(
    pool: ItemPool, cases: list[Case], kinds: Sequence[str | tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """Behaviour per item id: the named (or given) one for the first cases, robust for the rest."""
    chosen = {pool.items[case.index].item_id: BEHAVIOURS.get(kind, kind)
              for case, kind in zip(cases[:len(kinds)], kinds, strict=True)}
    return {item.item_id: chosen.get(item.item_id, (RIGHT, RIGHT)) for item in pool.items}


def _scripted_adversary(cases: list[Case], plan: Sequence[str]):
    """An action source playing, for the k-th sample of an item, plan[k]: 'move', 'stay' or 'invalid'."""
    by_index = {case.index: case for case in cases}

    def actions_for(indices: np.ndarray, heads: np.ndarray) -> np.ndarray:
        seen: Counter[int] = Counter()
        actions = []
        for index, item_heads in zip(indices.tolist(), heads, strict=True):
            case, what = by_index[index], plan[seen[index]]
            seen[index] += 1
            chosen = {"move": case.move, "stay": _stay(), "invalid": case.invalid}[what]
            actions.append(_in_head_order(chosen, item_heads))
        return np.array(actions)

    return actions_for


def test_drop_counts_only_right_before_wrong_after_while_consistency_counts_every_change(pool, cases):
    kinds = ["broken", "wrong, changed", "wrong, fixed", "robust", "always wrong"]
    game = Game(pool, ObjectZeroPlayer(pool, _behaviours(pool, cases, kinds)))
    used = cases[:len(kinds)]
    results = evaluate(game, [c.index for c in used], _scripted_adversary(used, ["move", "stay", "invalid"]),
                       samples=3, seed=5)

    by_kind = dict(zip(kinds, results, strict=True))
    assert [(r.tries, r.valid) for r in results] == [(3, 2)] * 5
    assert {k: (r.changed, r.dropped) for k, r in by_kind.items()} == {
        "broken": (True, True), "wrong, changed": (True, False), "wrong, fixed": (True, False),
        "robust": (False, False), "always wrong": (False, False),
    }
    expected_shares = {
        "broken": (1 / 3, 1 / 3), "wrong, changed": (1 / 3, 0.0), "wrong, fixed": (1 / 3, 0.0),
        "robust": (0.0, 0.0), "always wrong": (0.0, 0.0),
    }
    # One approx per tuple: pytest 9.2 refuses approx over a dict of tuples.
    assert {k: (r.changed_share, r.dropped_share) for k, r in by_kind.items()} == {
        k: pytest.approx(v) for k, v in expected_shares.items()}
    broken = by_kind["broken"]
    assert broken.best is not None and broken.best.dropped and broken.best.new_answer != broken.true_answer
    assert [obj for obj, _, _ in broken.best.moves] == [0]

    result = scores(results)
    # Three of five items change on one sample of three; only the one answered right before drops.
    assert result.consistency == pytest.approx(3 * (1 / 3) / 5)
    assert result.drop == pytest.approx((1 / 3) / 5)
    assert result.invalid == pytest.approx(5 / 15)
    assert result.clean_accuracy == pytest.approx(2 / 5)


def test_every_drop_is_a_change_and_drop_equals_consistency_only_for_a_right_player(pool, cases):
    # A player right on every original scene: each change is a drop, so the two figures agree.
    kinds = ["broken", "broken", "robust"]
    game = Game(pool, ObjectZeroPlayer(pool, _behaviours(pool, cases, kinds)))
    used = cases[:3]
    result = scores(evaluate(game, [c.index for c in used], _scripted_adversary(used, ["move", "move"]),
                             samples=2, seed=0))
    assert result.consistency == result.drop == pytest.approx(2 / 3)
    assert result.invalid == 0.0 and result.clean_accuracy == 1.0


def test_each_outcome_gets_the_reward_of_its_branch(pool, cases):
    rewards = Rewards(dr=1.5, cr=0.25, fr=-0.125, isr=-0.75)  # distinct from the defaults and each other
    kinds = ["broken", "wrong, changed", "wrong, fixed", "robust", "always wrong", (RIGHT, ERROR)]
    game = Game(pool, ObjectZeroPlayer(pool, _behaviours(pool, cases, kinds)), rewards=rewards)
    identity = np.tile(np.arange(MAX_OBJECTS), (len(kinds), 1))
    indices = np.array([c.index for c in cases])

    moved = game.play(indices, identity, np.array([c.move for c in cases]))
    assert [o.valid for o in moved] == [True] * 6
    assert [(o.reward, o.changed, o.dropped) for o in moved] == [
        (rewards.dr, True, True),
        (rewards.cr, True, False),
        (rewards.cr, True, False),
        (rewards.fr, False, False),
        (rewards.fr, False, False),
        (rewards.fr, False, False),  # the player failed to answer: neither a flip nor a hold
    ]
    assert moved[5].player_error == "object-zero: scripted failure" and moved[4].player_error is None

    stayed = game.play(indices, identity, np.tile(_stay(), (len(cases), 1)))
    assert all(o.valid and not o.changed and o.reward == rewards.fr for o in stayed)

    rejected = game.play(indices, identity, np.array([c.invalid for c in cases]))
    assert all(not o.valid and o.reason and o.new_answer is None for o in rejected)
    assert all(o.reward == rewards.isr and not o.changed and not o.dropped for o in rejected)
