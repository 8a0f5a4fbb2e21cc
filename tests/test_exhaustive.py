"""Exhaustive manipulation datasets: placements counted independently, scenes and answers re-checked one by one."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os

import numpy as np
import pytest

from clevr_game.cli import main
from clevr_game.dataset import load_questions
from clevr_game.enforcers import BoundaryEnforcer
from clevr_game.exhaustive import (
    BaseObjects,
    ExhaustiveOptions,
    draw_base,
    enumerate_placements,
    grid_centres,
    placement_xy,
)
from clevr_game.programs import compile_scene, execute
from clevr_game.scene import DEFAULT_DIRECTIONS, SceneObject, load_scenes

# CLEVR's render_images.py rules, written out here so the count does not go through clevr_game.layout.
BOARD, MIN_DIST, MARGIN = 3.0, 0.25, 0.4
RADIUS = {"large": 0.7, "small": 0.35}


def plain_valid_count(sizes: tuple[str, str]) -> int:
    """Valid placements of two objects on the 7 x 7 grid, every pair of cells checked in plain Python."""
    cell = 2 * BOARD / 7
    centres = [-BOARD + cell * (k + 0.5) for k in range(7)]
    left, front = DEFAULT_DIRECTIONS["left"], DEFAULT_DIRECTIONS["front"]
    first, second = (RADIUS[s] for s in sizes)
    count = 0
    for xa in centres:
        for ya in centres:
            for xb in centres:
                for yb in centres:
                    dx, dy = xb - xa, yb - ya
                    inside = all(abs(c) < BOARD for c in (xa, ya, xb, yb))
                    apart = math.hypot(dx, dy) - first - second >= MIN_DIST
                    clear = all(abs(dx * d[0] + dy * d[1]) >= MARGIN for d in (left, front))
                    count += inside and apart and clear
    return count


def two_objects(sizes: tuple[str, str]) -> BaseObjects:
    return BaseObjects((SceneObject(sizes[0], "red", "metal", "cube", (0.0, 0.0, RADIUS[sizes[0]])),
                        SceneObject(sizes[1], "blue", "rubber", "sphere", (0.0, 0.0, RADIUS[sizes[1]]))), (-1, -1))


@pytest.mark.parametrize("sizes", [("small", "small"), ("large", "small"), ("large", "large")])
def test_valid_placements_of_two_objects_match_a_plain_count(sizes):
    placements = enumerate_placements(two_objects(sizes), chunk=500)  # several chunks
    assert placements.total == 49**2
    assert placements.valid == plain_valid_count(sizes)
    assert sum(placements.rejected.values()) == placements.total - placements.valid
    assert len({tuple(row) for row in placements.cells.tolist()}) == placements.valid


def test_the_grid_is_the_adversarys_absolute_grid():
    from envs.moves import MoveSpace

    cell = 2 * BOARD / 7
    assert np.allclose(grid_centres(), [-BOARD + cell * (k + 0.5) for k in range(7)])
    assert np.array_equal(grid_centres(), MoveSpace(mode="absolute").values)


def test_four_objects_keep_one_in_place_by_default():
    options = ExhaustiveOptions(objects=4, hops="mix", seed=0, out="unused")
    base = draw_base(4, options.stationary_count, seed=5)
    assert options.stationary_count == 1 and base.stationary == (3,)
    placements = enumerate_placements(base)
    assert placements.total == 49**3
    xy = placement_xy(base, placements.cells)
    assert np.all(xy[:, 3] == xy[0, 3])
    assert len({tuple(o.attribute(a) for a in ("size", "color", "material", "shape")) for o in base.objects}) == 4


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("exhaustive") / "2-mix"
    printed = io.StringIO()
    umask = os.umask(0o027)  # the streamed files get the user's permissions, not the temporary file's 0600
    try:
        with contextlib.redirect_stdout(printed):
            status = main(["exhaustive", "--objects", "2", "--hops", "mix", "--seed", "0", "--out", str(out)])
    finally:
        os.umask(umask)
    assert status == 0
    return out, printed.getvalue()


@pytest.fixture
def dataset(built):
    return built[0]


def test_command_prints_the_counts_last(built):
    dataset, printed = built
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert printed.splitlines()[-1] == f"scenes: {manifest['valid']} valid of 2401 placements"
    assert manifest["placements"] == 2401
    assert manifest["valid"] + manifest["invalid"] == 2401
    sizes = tuple(o["size"] for o in manifest["base_objects"])
    assert manifest["valid"] == plain_valid_count(sizes)
    assert manifest["command"].startswith("clevr-game exhaustive --objects 2")
    assert sorted(p.name for p in dataset.iterdir()) == ["manifest.json", "questions.json", "scenes.json"]
    assert all(p.stat().st_mode & 0o777 == 0o640 for p in dataset.iterdir())


def test_every_scene_passes_the_boundary_enforcer_and_every_answer_is_the_executors(dataset):
    scenes = load_scenes(dataset / "scenes.json")
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert len(scenes) == manifest["valid"]
    enforcer = BoundaryEnforcer()
    assert all(enforcer.judge(scene).ok for scene in scenes)
    assert len({tuple(map(tuple, s.coords().tolist())) for s in scenes}) == len(scenes)

    for scene in scenes:
        assert scene.relationships == scene.computed_relationships()
        scene.relationships = None  # answers below from the coordinates alone, one scene at a time

    questions = load_questions(dataset / "questions.json")
    assert len(questions) == manifest["question_entries"]
    facts = {}
    for question in questions:
        scene = scenes[question.image_index]
        facts.setdefault(question.image_index, compile_scene(scene))
        assert question.answer == execute(question.program, facts[question.image_index])


def test_the_same_questions_are_asked_of_every_scene_and_their_answers_vary(dataset):
    manifest = json.loads((dataset / "manifest.json").read_text())
    chosen = {json.dumps(q["program"]) for q in manifest["questions"]}
    assert {q["family"] for q in manifest["questions"]} == {"one_hop", "two_hop"}
    asked: dict[int, set[str]] = {}
    answers: dict[str, set[str]] = {}
    for raw in json.loads((dataset / "questions.json").read_text())["questions"]:
        program = json.dumps(raw["program"])
        asked.setdefault(raw["image_index"], set()).add(program)
        answers.setdefault(program, set()).add(raw["answer"])
    assert set().union(*asked.values()) == chosen
    one_hop = {json.dumps(q["program"]) for q in manifest["questions"] if q["family"] == "one_hop"}
    # One-hop questions name their anchor by attributes only: defined on every scene.
    assert len(asked) == manifest["valid"] and all(one_hop <= programs for programs in asked.values())
    assert all(len(values) > 1 for values in answers.values())
    defined = sum(q["defined_scenes"] for q in manifest["questions"])
    assert defined == manifest["question_entries"]
    assert manifest["undefined_pairs"] == manifest["valid"] * len(chosen) - defined


def test_a_stationary_count_that_leaves_nothing_to_move_is_one_line(tmp_path, capsys):
    status = main(["exhaustive", "--objects", "2", "--hops", "one", "--stationary", "2", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert err == "clevr-game: error: --stationary 2: expected 0..1 (at least one of the 2 objects must move)"
    assert not any(tmp_path.iterdir())
