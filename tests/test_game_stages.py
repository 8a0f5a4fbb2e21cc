"""The three public stages of a move, each on its own: Game.judge, Game.ask, Game.score.

A hand-made scene (a cube, a sphere and a cylinder) and a question whose answer
depends on where the sphere is let every referee's reason, the player's caching
and every reward case be checked by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from clevr_game.errors import InputError
from clevr_game.programs import compile_scene, execute, parse_program
from clevr_game.scene import Scene, SceneObject
from clevr_game.vocab import CLEVR
from envs.game import Game, Rewards
from envs.items import Item, ItemPool
from envs.moves import STAY_BIN, stay_actions
from players.protocol import Answer, Player, Query

# How many things are right of the cube? The sphere's side of the cube decides.
RIGHT_OF_CUBE = parse_program([
    {"function": "scene", "inputs": []},
    {"function": "filter_shape", "inputs": [0], "value_inputs": ["cube"]},
    {"function": "unique", "inputs": [1]},
    {"function": "relate", "inputs": [2], "value_inputs": ["right"]},
    {"function": "count", "inputs": [3]},
])
IDENTITY = np.arange(10)[None]


def _scene() -> Scene:
    """In the camera's frame: the sphere 0.6 right of the cube and the cylinder 1.5 right, so the answer is 2."""
    return Scene([
        SceneObject("large", "gray", "rubber", "cube", (0.0, 0.0, 0.7)),
        SceneObject("small", "red", "metal", "sphere", (-0.587, 1.306, 0.35)),
        SceneObject("small", "blue", "rubber", "cylinder", (2.493, -0.181, 0.35)),
    ], vocabulary=CLEVR)


def _item(item_id: str = "0:0") -> Item:
    scene = _scene()
    return Item(item_id, scene, "How many things are right of the cube?", RIGHT_OF_CUBE,
                execute(RIGHT_OF_CUBE, compile_scene(scene)))


def _move(obj: int, bin_x: int, bin_y: int = STAY_BIN) -> np.ndarray:
    action = stay_actions(1)
    action[0, 2 * obj], action[0, 2 * obj + 1] = bin_x, bin_y
    return action


class CountingPlayer(Player):
    """Answers from a script of the sphere's x coordinate, counting every query; fails when told to."""

    name = "counting"
    needs = frozenset({"scene"})

    def __init__(self, answer_for=lambda x: "1", failures: int = 0):
        self.answer_for, self.failures = answer_for, failures
        self.queries: list[Query] = []

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers = []
        for query in queries:
            self.queries.append(query)
            if self.failures > 0:
                self.failures -= 1
                answers.append(Answer.failed(query.item_id, "flaky"))
            else:
                answers.append(Answer(query.item_id, self.answer_for(query.scene.objects[1].coords[0])))
        return answers


# ---------------------------------------------------------------------- judge


def test_judge_gives_each_layout_reason_and_asks_nobody():
    player = CountingPlayer()
    game = Game(ItemPool([_item()]), player)
    leaves = game.judge(np.array([0]), IDENTITY, _move(2, 6))  # the cylinder +0.9 past x = 3
    assert not leaves.valid[0]
    assert leaves.verdicts(0)[0].reason == "object 2 (small blue rubber cylinder) leaves the board (-3, 3)"
    overlaps = game.judge(np.array([0]), IDENTITY, _move(1, 5, 0))  # the sphere onto the cube
    assert overlaps.verdicts(0)[0].reason == "object 0 (large gray rubber cube) overlaps object 1 (small red metal sphere)"
    assert player.queries == []


def test_judge_rejects_a_move_that_changes_the_true_answer_and_accepts_one_that_does_not():
    game = Game(ItemPool([_item()]), CountingPlayer())
    assert game.pool.items[0].answer == "2"
    kept = game.judge(np.array([0]), IDENTITY, _move(1, 4))  # the sphere stays right of the cube
    assert kept.valid[0] and [v.enforcer for v in kept.verdicts(0)] == ["boundary", "relevance"]
    crossed = game.judge(np.array([0]), IDENTITY, _move(1, 0, 0))  # the sphere goes left of the cube
    assert not crossed.valid[0] and crossed.verdicts(0)[-1].reason == "answer changed from 2 to 1"


def test_judge_marks_unmoved_rows_and_judges_them_once_per_item():
    game = Game(ItemPool([_item()]), CountingPlayer())
    first = game.judge(np.array([0, 0]), np.repeat(IDENTITY, 2, 0), np.vstack([stay_actions(1), _move(1, 4)]))
    assert first.unmoved.tolist() == [True, False] and first.valid.all()
    assert first.moves(0) == [] and first.moves(1) == [(1, 0.3, 0.0)]
    again = game.judge(np.array([0]), IDENTITY, stay_actions(1))
    assert again.verdicts(0) is first.verdicts(0)  # cached per item
    assert first.scene(1).objects[1].coords[0] == pytest.approx(-0.287)


def test_judge_asks_a_visibility_hook_after_the_layout():
    game = Game(ItemPool([_item()]), CountingPlayer(), visibility=lambda scene: [2])
    judged = game.judge(np.array([0]), IDENTITY, _move(1, 4))
    assert not judged.valid[0]
    assert judged.verdicts(0)[-1].reason == "object 2 (small blue rubber cylinder) is not visible"


# ---------------------------------------------------------------------- ask


def test_ask_caches_old_answers_and_asks_only_valid_moved_scenes():
    player = CountingPlayer(lambda x: "1" if x > -0.4 else "2")
    game = Game(ItemPool([_item()]), player)
    actions = np.vstack([stay_actions(1), _move(1, 4), _move(1, 6, 6), _move(1, 4)])
    judged = game.judge(np.zeros(4, dtype=int), np.repeat(IDENTITY, 4, 0), actions)
    answers = game.ask(judged)
    assert judged.valid.tolist() == [True, True, False, True]
    assert [a.text for a in answers.old] == ["2"] * 4
    assert answers.new[0] is answers.old[0] and answers.new[2] is None
    assert [answers.new[1].text, answers.new[3].text] == ["1", "1"]
    assert len(player.queries) == 1 + 2  # the old answer once, the two valid moved scenes
    game.ask(game.judge(np.array([0]), IDENTITY, stay_actions(1)))
    assert len(player.queries) == 3  # the old answer comes from the cache


def test_ask_retries_a_failed_old_answer_and_caches_only_its_success():
    player = CountingPlayer(failures=2)
    game = Game(ItemPool([_item()]), player)
    (old,) = game.ask(game.judge(np.array([0]), IDENTITY, stay_actions(1))).old
    assert old.ok and len(player.queries) == 3
    stubborn = Game(ItemPool([_item()]), CountingPlayer(failures=100), old_answer_attempts=2)
    (failed,) = stubborn.ask(stubborn.judge(np.array([0]), IDENTITY, stay_actions(1))).old
    assert failed.error == "flaky" and len(stubborn.player.queries) == 2


def test_a_game_without_a_player_judges_and_scores_but_does_not_ask():
    game = Game(ItemPool([_item()]), None)
    judged = game.judge(np.array([0]), IDENTITY, _move(1, 4))
    assert judged.valid[0]
    with pytest.raises(InputError, match="no player"):
        game.ask(judged)


# ---------------------------------------------------------------------- score


@pytest.mark.parametrize(("old", "new", "reward", "changed", "dropped", "counted"), [
    ("TRUE", "other", 1.0, True, True, True),      # dr: a right answer broken
    ("wrong", "other", 0.1, True, False, True),    # cr: a wrong answer changed
    ("wrong", "TRUE", 0.1, True, False, True),     # cr: a wrong answer fixed
    ("TRUE", "TRUE", -0.1, False, False, True),    # fr: nothing changed
    ("TRUE", None, -0.1, False, False, False),     # fr: the player failed on the moved scene
    (None, "TRUE", -0.1, False, False, False),     # fr: the player never answered the original
])
def test_score_gives_every_reward_case(old, new, reward, changed, dropped, counted):
    game = Game(ItemPool([_item()]), None)
    judged = game.judge(np.array([0]), IDENTITY, _move(1, 4))
    truth = game.pool.items[0].answer

    def answer(text):
        return Answer.failed("0:0", "boom") if text is None else Answer("0:0", truth if text == "TRUE" else text)

    outcomes = game.score(judged, [answer(old)], [answer(new)])
    (outcome,) = outcomes
    assert (outcome.reward, outcome.changed, outcome.dropped, outcome.counted) == (reward, changed, dropped, counted)
    assert outcomes.rewards.tolist() == [reward] and outcomes.counted.tolist() == [counted]
    assert outcome.valid and outcome.moves == [(1, 0.3, 0.0)] and outcome.new_scene is not None


def test_score_gives_isr_to_an_invalid_move_and_its_reason():
    game = Game(ItemPool([_item()]), None, rewards=Rewards(isr=-0.5))
    judged = game.judge(np.array([0]), IDENTITY, _move(2, 6))
    (outcome,) = game.score(judged, [Answer("0:0", "1")], [None])
    assert (outcome.valid, outcome.reward, outcome.new_scene) == (False, -0.5, None)
    assert outcome.reason.endswith("leaves the board (-3, 3)") and outcome.moves == [(2, 0.9, 0.0)]
