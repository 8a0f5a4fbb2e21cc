"""CLEVR's visibility rule in the game: a move that hides an object is invalid, with its reason."""

from __future__ import annotations

import numpy as np
import pytest

from clevr_game.programs import parse_program
from clevr_game.render import Renderer
from clevr_game.scene import DEFAULT_DIRECTIONS, Scene, SceneObject
from clevr_game.vocab import CLEVR
from envs.game import Game
from envs.items import Item, ItemPool
from players.oracle import OraclePlayer

W, H = 96, 64
HIDDEN_SPOT = (np.array(DEFAULT_DIRECTIONS["behind"]) * 1.5 + np.array(DEFAULT_DIRECTIONS["right"]) * 0.45)[:2]


@pytest.fixture(scope="module")
def renderer():
    with Renderer("fast", width=W, height=H, workers=1) as fast:
        yield fast


def _item(cube: tuple[float, float], sphere: tuple[float, float]) -> Item:
    scene = Scene([
        SceneObject("large", "gray", "rubber", "cube", (cube[0], cube[1], 0.7)),
        SceneObject("small", "red", "rubber", "sphere", (float(sphere[0]), float(sphere[1]), 0.35)),
    ], vocabulary=CLEVR)
    program = parse_program([{"function": "scene", "inputs": []}, {"function": "count", "inputs": [0]}])
    return Item("0:0", scene, "How many things are there?", program, "2")


def _about_to_hide() -> Item:
    """One move of +0.9 along x carries the sphere straight behind the cube."""
    return _item((0.0, 0.0), HIDDEN_SPOT - np.array([0.9, 0.0]))


def _in_plain_view() -> Item:
    """The sphere in the middle of the board, the cube far off in a corner."""
    return _item((-2.5, -2.5), (0.0, 0.0))


def _move_sphere(bin_x: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    actions = np.full((1, 20), 3)
    actions[0, 2] = bin_x  # head 1 (the sphere), x axis
    return np.array([0]), np.tile(np.arange(10), (1, 1)), actions


def test_a_move_that_hides_an_object_is_invalid_with_its_pixel_count(renderer):
    game = Game(ItemPool([_about_to_hide()]), OraclePlayer(), renderer=renderer, check_visibility=True)
    (hidden,) = game.play(*_move_sphere(6))  # +0.9: behind the cube
    assert not hidden.valid and hidden.reward == game.rewards.isr
    verdict = hidden.verdicts[-1]
    assert verdict.enforcer == "visibility"
    assert verdict.reason.startswith("object 1 (small red rubber sphere) is hidden: ")
    shown = int(verdict.reason.split("hidden: ")[1].split()[0])
    assert shown < renderer.pixel_threshold
    assert shown == 0
    game = Game(ItemPool([_in_plain_view()]), OraclePlayer(), renderer=renderer, check_visibility=True)
    (visible,) = game.play(*_move_sphere(4))
    assert visible.valid and visible.verdicts[-1].enforcer == "visibility" and visible.verdicts[-1].ok


def test_visibility_is_off_by_default_for_players_that_see_no_image(renderer):
    game = Game(ItemPool([_about_to_hide()]), OraclePlayer(), renderer=renderer)
    assert game.visibility is None
    (outcome,) = game.play(*_move_sphere(6))
    assert outcome.valid  # the layout rules alone accept it


def test_generate_with_visibility_redraws_scenes_that_hide_an_object(tmp_path, renderer):
    from clevr_game.generate import generate_dataset
    from clevr_game.scene import load_scenes

    generate_dataset(tmp_path / "checked", 12, 1, seed=4, progress=False, check_visibility=True)
    generate_dataset(tmp_path / "plain", 12, 1, seed=4, progress=False)
    checked = load_scenes(tmp_path / "checked" / "scenes.json")
    plain = load_scenes(tmp_path / "plain" / "scenes.json")
    with Renderer("fast", workers=1) as clevr_size:  # the index pass at CLEVR's 320 x 240
        assert all(not clevr_size.hidden_objects(scene) for scene in checked)
        assert any(clevr_size.hidden_objects(scene) for scene in plain)  # seed 4 draws one that hides an object
