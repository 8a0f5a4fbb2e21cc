"""The geometric visibility count against Blender's object-index pass, and the game's choice of counter."""

from __future__ import annotations

import numpy as np
import pytest

from clevr_game.errors import InputError
from clevr_game.generate import generate_scenes
from clevr_game.programs import parse_program
from clevr_game.render import Renderer
from clevr_game.render.renderer import CLEVR_MIN_PIXELS
from clevr_game.render.silhouettes import (
    geometric_counter,
    object_index_image,
    pixel_rays,
    visible_pixels_geometric,
)
from clevr_game.scene import (
    CAMERA_LENS_MM,
    CAMERA_MATRIX_WORLD,
    CAMERA_SENSOR_WIDTH_MM,
    DEFAULT_DIRECTIONS,
    Scene,
    SceneObject,
    project_to_pixels,
)
from clevr_game.vocab import CLEVR, CLEVR_POC
from envs.game import Game
from envs.items import Item, ItemPool
from players.oracle import OraclePlayer

CAMERA = CAMERA_MATRIX_WORLD[:3, 3]


@pytest.fixture(scope="module")
def index_pass():
    """The renderer's index pass at CLEVR's 320 x 240 (its colour images, unused here, are tiny)."""
    with Renderer("fast", width=32, height=24, use_cache=False) as renderer:
        yield renderer.visible_pixels


def _scene(*objects: SceneObject) -> Scene:
    return Scene(list(objects), vocabulary=CLEVR_POC)


def _sphere_behind_cube(aside: float) -> Scene:
    """A large cube, and a small sphere behind it as the camera sees it, `aside` to its right."""
    spot = np.array(DEFAULT_DIRECTIONS["behind"]) * 1.5 + np.array(DEFAULT_DIRECTIONS["right"]) * aside
    return _scene(
        SceneObject("large", "gray", "rubber", "cube", (0.0, 0.0, 0.7)),
        SceneObject("small", "red", "rubber", "sphere", (float(spot[0]), float(spot[1]), 0.35)),
    )


def _ground_under_pixel(column: int, row: int, height: float) -> tuple[float, float, float]:
    """The point at `height` above the ground seen through the centre of pixel (column, row) at 320 x 240."""
    direction = np.array([component[row, column] for component in pixel_rays(320, 240)])
    point = CAMERA + direction * (height - CAMERA[2]) / direction[2]
    return (float(point[0]), float(point[1]), float(point[2]))


def _close(geometric: list[int], index: list[int], share: float = 0.01, pixels: int = 3) -> bool:
    """Every object's count within `share` of the index pass's, or `pixels`, whichever is more."""
    return all(abs(g - i) <= max(pixels, share * i) for g, i in zip(geometric, index, strict=True))


# ------------------------------------------------------------------ against the index pass


def test_an_object_hidden_behind_a_cube_shows_no_pixel_as_in_the_index_pass(index_pass) -> None:
    scene = _sphere_behind_cube(aside=0.45)
    geometric, index = visible_pixels_geometric(scene), index_pass(scene)
    assert index[1] == 0 and geometric[1] == 0
    assert _close(geometric, index)


def test_a_partly_hidden_object_shows_the_same_sliver_as_in_the_index_pass(index_pass) -> None:
    scene = _sphere_behind_cube(aside=1.0)
    alone = visible_pixels_geometric(_scene(scene.objects[1]))[0]
    geometric, index = visible_pixels_geometric(scene), index_pass(scene)
    assert 0 < index[1] < CLEVR_MIN_PIXELS < alone  # hidden enough to fail CLEVR's rule
    assert _close(geometric, index)


def test_an_object_cut_by_the_image_border_counts_only_its_pixels_inside(index_pass) -> None:
    # The centres of a cylinder on the left edge and a cube on the bottom edge, each half outside.
    left = _scene(SceneObject("large", "blue", "rubber", "cylinder", _ground_under_pixel(0, 150, 0.7)))
    bottom = _scene(SceneObject("large", "blue", "rubber", "cube", _ground_under_pixel(200, 239, 0.7), 20.0))
    for scene in (left, bottom):
        geometric, index = visible_pixels_geometric(scene), index_pass(scene)
        assert _close(geometric, index)
        owner = object_index_image(scene)
        assert (owner[:, 0] == 0).any() if scene is left else (owner[-1] == 0).any()


def test_a_lone_object_of_each_shape_covers_the_same_pixels_within_a_percent(index_pass) -> None:
    for shape in ("cube", "sphere", "cylinder", "cone"):
        scene = _scene(SceneObject("large", "gray", "rubber", shape, (0.5, -1.0, 0.7), 30.0))
        geometric, index = visible_pixels_geometric(scene), index_pass(scene)
        assert index[0] > 1000 and _close(geometric, index), (shape, geometric, index)


def test_generated_scenes_get_the_index_pass_counts_and_verdicts(index_pass) -> None:
    scenes = list(generate_scenes(3, seed=7)) + list(generate_scenes(3, seed=8, vocabulary=CLEVR_POC))
    for scene in scenes:
        geometric, index = visible_pixels_geometric(scene), index_pass(scene)
        assert _close(geometric, index, share=0.02), (geometric, index)
        assert [g < CLEVR_MIN_PIXELS for g in geometric] == [i < CLEVR_MIN_PIXELS for i in index]


# ------------------------------------------------------------------ geometry alone


def test_pixel_rays_pass_through_what_project_to_pixels_puts_at_their_centre() -> None:
    rays = pixel_rays(320, 240)
    rng = np.random.default_rng(0)
    columns, rows = rng.integers(0, 320, 20), rng.integers(0, 240, 20)
    directions = np.array([[component[r, c] for component in rays] for c, r in zip(columns, rows, strict=True)])
    points = CAMERA + directions * rng.uniform(5.0, 20.0, (20, 1))
    # At a hundred times the size a pixel's centre is the integer 100 * i + 50, up to rounding.
    fine = project_to_pixels(points, 32000, 24000)
    assert np.abs(fine[:, 0] - (100 * columns + 50)).max() <= 1
    assert np.abs(fine[:, 1] - (100 * rows + 50)).max() <= 1


def test_a_sphere_on_the_optical_axis_covers_its_projected_disc() -> None:
    forward = -CAMERA_MATRIX_WORLD[:3, 2]
    distance, radius = 10.0, 0.7
    centre = CAMERA + forward * distance
    scene = Scene([SceneObject("large", "red", "rubber", "sphere", tuple(float(c) for c in centre))], vocabulary=CLEVR)
    focal = 320 * CAMERA_LENS_MM / CAMERA_SENSOR_WIDTH_MM
    disc = np.pi * (focal * np.tan(np.arcsin(radius / distance))) ** 2
    assert visible_pixels_geometric(scene)[0] == pytest.approx(disc, rel=0.01)
    # A quarter of the pixels at half the size, and the disc in the middle of the frame.
    assert visible_pixels_geometric(scene, 160, 120)[0] == pytest.approx(disc / 4, rel=0.02)
    owner = object_index_image(scene)
    assert owner[120, 160] == 0 and owner[0, 0] == -1


def test_objects_out_of_frame_show_nothing_and_an_empty_scene_has_no_counts() -> None:
    far_off = _scene(SceneObject("large", "red", "rubber", "cube", (40.0, 0.0, 0.7)))
    behind_the_camera = _scene(SceneObject("small", "red", "rubber", "sphere", (12.0, -11.0, 0.35)))
    assert visible_pixels_geometric(far_off) == [0]
    assert visible_pixels_geometric(behind_the_camera) == [0]
    assert visible_pixels_geometric(Scene([])) == []


def test_a_shape_or_size_it_cannot_draw_and_a_portrait_size_are_one_line_errors() -> None:
    with pytest.raises(InputError, match=r"^object 0: cannot render shape 'torus'"):
        visible_pixels_geometric(_scene(SceneObject("large", "red", "rubber", "torus", (0.0, 0.0, 0.7))))
    with pytest.raises(InputError, match=r"^object 0: size 'medium' is not in vocabulary"):
        visible_pixels_geometric(Scene([SceneObject("medium", "red", "rubber", "cube", (0.0, 0.0, 0.5))]))
    with pytest.raises(InputError, match="width >= height, got 240x320"):
        geometric_counter(240, 320)


# ------------------------------------------------------------------ the game's counter


def _item(cube: tuple[float, float], sphere: tuple[float, float]) -> Item:
    scene = Scene([
        SceneObject("large", "gray", "rubber", "cube", (cube[0], cube[1], 0.7)),
        SceneObject("small", "red", "rubber", "sphere", (sphere[0], sphere[1], 0.35)),
    ], vocabulary=CLEVR)
    program = parse_program([{"function": "scene", "inputs": []}, {"function": "count", "inputs": [0]}])
    return Item("0:0", scene, "How many things are there?", program, "2")


def _item_about_to_hide() -> Item:
    """One move of +0.9 along x carries the sphere straight behind the cube (as in test_visibility)."""
    sphere = _sphere_behind_cube(aside=0.45).objects[1].coords
    return _item((0.0, 0.0), (sphere[0] - 0.9, sphere[1]))


def _move_sphere(bin_x: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    actions = np.full((1, 20), 3)
    actions[0, 2] = bin_x  # head 1 (the sphere), x axis
    return np.array([0]), np.tile(np.arange(10), (1, 1)), actions


def test_the_game_judges_visibility_geometrically_by_default_without_starting_blender() -> None:
    game = Game(ItemPool([_item_about_to_hide()]), OraclePlayer(), check_visibility=True)
    (hidden,) = game.play(*_move_sphere(6))  # +0.9: behind the cube
    assert not hidden.valid
    assert hidden.verdicts[-1].reason == "object 1 (small red rubber sphere) is hidden: 0 pixels (at least 200 must show)"
    game = Game(ItemPool([_item((-2.5, -2.5), (0.0, 0.0))]), OraclePlayer(), check_visibility=True)
    (visible,) = game.play(*_move_sphere(4))  # the sphere in plain view, the cube far off
    assert visible.valid and visible.verdicts[-1].enforcer == "visibility" and visible.verdicts[-1].ok
    assert game.renderer is None  # no Blender worker was needed


def test_the_index_pass_stays_available_and_an_unknown_counter_is_refused() -> None:
    with Renderer("fast", width=32, height=24, index_size=(96, 64), use_cache=False) as renderer:
        pool = ItemPool([_item_about_to_hide()])
        by_index = Game(pool, OraclePlayer(), renderer=renderer, check_visibility=True, visibility_counter="index")
        assert by_index.visibility.count_pixels == renderer.visible_pixels_many
        geometric = Game(pool, OraclePlayer(), renderer=renderer, check_visibility=True)
        # Counted at the renderer's index size, against its threshold scaled to that size.
        assert geometric.visibility.min_pixels == renderer.pixel_threshold
        scene = pool.items[0].scene
        assert geometric.visibility.count_pixels([scene]) == [visible_pixels_geometric(scene, 96, 64)]
        assert renderer.worker_pids() == [None]  # the geometric count started no Blender worker
    with pytest.raises(InputError, match="visibility_counter must be one of geometric, index, got 'blender'"):
        Game(pool, OraclePlayer(), visibility_counter="blender")
