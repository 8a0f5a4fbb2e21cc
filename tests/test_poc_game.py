"""CLEVR-POC items in the game: the oracle's set answers, regions that follow moved objects.

Every answer the game relies on is re-checked against the independent clingo
encoding of tests/test_asp_oracle.py (a fresh program per question, plain
enumeration), so agreement is evidence rather than the referee agreeing with itself.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from test_asp_oracle import oracle_answers

from agents.evaluation import evaluate, jaccard_loss, scores
from clevr_game.asp.regions import regions_of
from clevr_game.asp.solve import scene_regions
from clevr_game.enforcers import RelevanceEnforcer
from clevr_game.errors import InputError
from clevr_game.scene import Scene
from envs.game import Game, Outcome
from envs.items import ItemPool, load_items
from envs.moves import STAY_BIN
from envs.poc_items import PocRules
from players.oracle import OraclePlayer
from players.protocol import NEED_SCENE, Answer, Player, Query, query_to_wire


@pytest.fixture(scope="module")
def poc_folder(tmp_path_factory: pytest.TempPathFactory):
    from clevr_game.asp.dataset import generate_poc_dataset

    folder = tmp_path_factory.mktemp("poc")
    generate_poc_dataset(folder, 2, 16, seed=5)
    return folder


@pytest.fixture(scope="module")
def items(poc_folder):
    return load_items(poc_folder)


def rows_of(scene: Scene) -> list[tuple[str, str, str, str, int]]:
    """The fresh oracle's rows: attributes and the region of each centre (never a stored field)."""
    regions = regions_of(scene.coords(), scene.directions).tolist()
    return [(o.size, o.color, o.material, o.shape, r) for o, r in zip(scene.objects, regions, strict=True)]


def fresh_answer(item, scene: Scene) -> str:
    environment_text = Path(item.extra["environment_file"]).read_text(encoding="utf-8")
    return ",".join(oracle_answers(environment_text, rows_of(scene), item.extra["asp"]))


def across(scene: Scene, obj: int, axis: str) -> Scene:
    """The scene with object `obj` mirrored across the dividing line normal to `axis`."""
    direction = np.asarray(scene.directions[axis][:2], dtype=float)
    direction /= np.linalg.norm(direction)
    coords = scene.coords()
    coords[obj, :2] -= 2 * (coords[obj, :2] @ direction) * direction
    return scene.with_coords(coords)


# ---------------------------------------------------------------- regions follow coordinates


def test_a_moved_object_carries_the_region_of_its_new_centre(items):
    item = items[0]
    moved = across(item.scene, 0, "right")
    before, after = item.scene.objects[0].extra["region"], moved.objects[0].extra["region"]
    assert after == int(regions_of(moved.coords()[:1])[0]) and after != before
    # ... in the JSON a player is sent as well.
    wire = query_to_wire(Query(item.item_id, item.question, scene=moved), frozenset({NEED_SCENE}))
    assert wire["scene"]["objects"][0]["region"] == after


def test_a_region_field_that_contradicts_the_coordinates_is_one_line_naming_the_object(items):
    scene = items[0].scene
    wrong = (scene.objects[1].extra["region"] + 1) % 4
    objects = [*scene.objects]
    objects[1] = dataclasses.replace(objects[1], extra={**objects[1].extra, "region": wrong})
    with pytest.raises(InputError, match=r"partial.json: object 1: region \d disagrees with its 3d_coords"):
        scene_regions(dataclasses.replace(scene, objects=objects), "partial.json")


def test_relevance_follows_an_object_across_each_region_line_as_fresh_clingo_does(items):
    rules = PocRules()
    relevance = RelevanceEnforcer(rules)
    verdicts = []
    for item in items:
        for obj in range(len(item.scene)):
            for axis in ("right", "front"):
                moved = across(item.scene, obj, axis)
                if not rules.check(item, moved).ok:
                    continue  # the asp referee rejects it first
                expected = fresh_answer(item, moved)
                verdict = relevance.judge(moved, item)
                assert verdict.ok == (expected == item.answer), (item.item_id, obj, axis, verdict.reason)
                verdicts.append(verdict.ok)
    # Both kinds occur, so a referee reading the object's old region would fail here.
    assert verdicts.count(False) >= 3 and verdicts.count(True) >= 3


# ---------------------------------------------------------------- the oracle


def test_the_oracle_answers_every_poc_item_with_its_stored_set(items):
    game = Game(ItemPool(items), OraclePlayer())
    answers = game.old_answers(range(len(items)))
    assert [a.error for a in answers] == [None] * len(items)
    assert [a.text for a in answers] == [item.answer for item in items]


def test_a_poc_query_carries_its_environment_to_every_player(items):
    seen = []

    class Recorder(OraclePlayer):
        needs = frozenset({NEED_SCENE})  # not even the program: the environment is part of the question

        def answer_batch(self, queries):
            seen.extend(queries)
            return super().answer_batch(queries)

    game = Game(ItemPool(items[:2]), Recorder())
    game.old_answers([0, 1])
    assert seen[0].environment == Path(items[0].extra["environment_file"]).read_text(encoding="utf-8")
    assert query_to_wire(seen[0], frozenset())["environment"].startswith("% CLEVR-POC environment")


def test_the_oracle_never_changes_its_answer_on_thousands_of_valid_moves(items):
    """Random one-object moves through the game; a sample of the valid ones re-solved from scratch."""
    pool = ItemPool(items)
    game = Game(pool, OraclePlayer())
    rng = np.random.default_rng(0)
    batch, valid, checked = 256, 0, 0
    heads = np.tile(np.arange(10), (batch, 1))
    while valid < 2000:
        indices = rng.integers(len(pool), size=batch)
        actions = np.full((batch, 20), STAY_BIN)
        moved = rng.integers(0, pool.num_objects[indices])
        # Bins 1..5 (0.6 at most per axis) keep many moves inside the layout rules; some cross a region line.
        actions[np.arange(batch), 2 * moved] = rng.integers(1, 6, batch)
        actions[np.arange(batch), 2 * moved + 1] = rng.integers(1, 6, batch)
        for index, outcome in zip(indices.tolist(), game.play(indices, heads, actions), strict=True):
            if not outcome.valid or not outcome.moves:
                continue
            valid += 1
            assert outcome.player_error is None
            assert outcome.new_answer == outcome.old_answer == outcome.true_answer
            if valid % 40 == 0:
                assert fresh_answer(pool.items[index], outcome.new_scene) == outcome.true_answer
                checked += 1
    assert checked >= 50



# ---------------------------------------------------------------- set answers in the scores


class NarrowingPlayer(Player):
    """Answers the true set on a scene it has not seen moved and only the first true value once moved."""

    name = "narrowing"
    needs = frozenset({NEED_SCENE})

    def __init__(self, items):
        self.truth = {it.item_id: it.answer for it in items}
        self.first_seen: dict[str, list] = {}

    def answer_batch(self, queries):
        answers = []
        for query in queries:
            coords = query.scene.coords().tolist()
            moved = self.first_seen.setdefault(query.item_id, coords) != coords
            truth = self.truth[query.item_id]
            answers.append(Answer(query.item_id, truth.split(",")[0] if moved else truth))
        return answers


def test_the_jaccard_loss_of_set_answers_is_counted_per_move(items):
    truth = "blue,green,red"
    valid = Outcome("0", True, [], truth, truth, "blue", 0.0, [(0, 0.3, 0.0)])
    assert jaccard_loss(valid) == pytest.approx(1.0 - 1 / 3)
    invalid = dataclasses.replace(valid, valid=False, new_answer=None)
    assert jaccard_loss(invalid) == 0.0
    wider = dataclasses.replace(valid, old_answer="blue", new_answer="blue,green")
    assert jaccard_loss(wider) == pytest.approx(1 / 3 - 2 / 3)  # a better answer: a negative loss

    pool = ItemPool(items[:6])
    game = Game(pool, NarrowingPlayer(pool.items))
    rng = np.random.default_rng(1)

    def one_object_moves(indices, heads):
        actions = np.full((len(indices), 20), STAY_BIN)
        actions[np.arange(len(indices)), 0] = rng.integers(2, 5, len(indices))  # head 0's x: -0.3 .. +0.3
        return actions

    results = evaluate(game, list(range(len(pool))), one_object_moves, samples=8, seed=0)
    for item, result in zip(pool.items, results, strict=True):
        size = len(item.answer.split(","))
        moved_valid = [o for o in result.valid_moves if o.moves]
        expected = len(moved_valid) * (1.0 - 1.0 / size) / result.counted
        assert result.jaccard_loss == pytest.approx(expected)
    assert scores(results).jaccard_loss == pytest.approx(np.mean([r.jaccard_loss for r in results]))
    assert scores(results).to_json()["jaccard_loss"] > 0


def test_benchmark_reports_group_poc_items_by_the_asked_attribute(poc_folder, items):
    from benchmarks.report import read_items_folder

    families = read_items_folder(str(poc_folder)).families
    assert families == {item.item_id: f"hidden {item.extra['query_attribute']}" for item in items}
