"""Scenes: real CLEVR files load unchanged, relationships are reproduced, bad input is named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clevr_game.errors import InputError
from clevr_game.scene import (
    CAMERA_MATRIX_WORLD,
    DEFAULT_DIRECTIONS,
    load_scenes,
    parse_scene,
    project_to_pixels,
    save_scenes,
)
from clevr_game.vocab import CLEVR, CLEVR_POC

REAL_FILES = ["CLEVR_val_scenes_500.json", "CLEVR_train_scenes_1000.json", "CLEVR_val_scenes_sample11.json"]


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_scenes_load_and_relationships_are_recomputed_exactly(clevr_real, name):
    scenes = load_scenes(clevr_real / name)
    assert len(scenes) in (500, 1000, 11)
    for scene in scenes:
        assert scene.computed_relationships() == scene.relationships


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_scenes_round_trip_unchanged(clevr_real, name, tmp_path):
    raw = json.loads((clevr_real / name).read_text())
    scenes = load_scenes(clevr_real / name)
    out = tmp_path / "scenes.json"
    save_scenes(out, scenes, raw["info"])
    assert json.loads(out.read_text()) == raw


def test_camera_directions_match_the_real_data(clevr_real):
    scene = load_scenes(clevr_real / "CLEVR_val_scenes_sample11.json")[0]
    for rel, vec in DEFAULT_DIRECTIONS.items():
        np.testing.assert_allclose(vec, scene.directions[rel], atol=1e-6)


def test_pixel_projection_is_within_camera_jitter_of_real_clevr(clevr_real):
    # CLEVR jittered the camera per image; the base camera lands within a few pixels.
    errors = []
    for scene in load_scenes(clevr_real / "CLEVR_val_scenes_500.json")[:100]:
        predicted = project_to_pixels(scene.coords())
        actual = np.array([o.pixel_coords for o in scene.objects], dtype=float)
        errors.append(np.abs(predicted[:, :2] - actual[:, :2]))
    errors = np.concatenate(errors)
    assert errors.mean() < 4.0
    assert np.median(errors) < 3.0


def test_pixel_depth_is_the_same_bits_on_every_cpu():
    # Plain Python floats round each product and sum on their own; a BLAS product may fuse them
    # on one CPU and not on another, which changed the shipped sample's bytes between machines.
    rng = np.random.default_rng(0)
    coords = rng.uniform(-3.0, 3.0, size=(200, 3))
    rotation = CAMERA_MATRIX_WORLD[:3, :3].tolist()
    origin = CAMERA_MATRIX_WORLD[:3, 3].tolist()
    depths = project_to_pixels(coords)[:, 2].tolist()
    for point, depth in zip(coords.tolist(), depths, strict=True):
        offset = [point[k] - origin[k] for k in range(3)]
        expected = -((offset[0] * rotation[0][2] + offset[1] * rotation[1][2]) + offset[2] * rotation[2][2])
        assert depth == expected


def _scene_dict(**object_overrides):
    clean = {"color": "red", "size": "large", "shape": "cube", "material": "metal",
             "3d_coords": [2.0, 2.0, 0.7], "rotation": 0.0}
    other = {**clean, "3d_coords": [0.0, 0.0, 0.7], **object_overrides}
    return {"objects": [clean, other]}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"color": "pink"}, "scenes.json: scene 12, object 1: unknown color 'pink' (expected one of gray, red,"),
        ({"shape": "cone"}, "scene 12, object 1: unknown shape 'cone'"),
        ({"size": 3}, "scene 12, object 1: size must be a string"),
        ({"3d_coords": [0.0, "x", 0.7]}, "scene 12, object 1: 3d_coords must be a finite number"),
        ({"3d_coords": [0.0, 0.7]}, "scene 12, object 1: 3d_coords must be a list of 3 numbers"),
        ({"rotation": None}, "scene 12, object 1: rotation must be a finite number"),
    ],
)
def test_bad_objects_name_file_scene_object_and_field(override, message):
    with pytest.raises(InputError) as err:
        parse_scene(_scene_dict(**override), "scenes.json", 12)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_field_is_named():
    data = _scene_dict()
    del data["objects"][1]["material"]
    with pytest.raises(InputError, match=r"scene 0, object 1: missing field 'material'"):
        parse_scene(data, "s.json", 0)


def test_poc_vocabulary_is_opt_in():
    data = _scene_dict(shape="cone", size="medium")
    data["vocabulary"] = "clevr-poc"
    scene = parse_scene(data)
    assert scene.vocabulary is CLEVR_POC
    assert scene.to_json()["vocabulary"] == "clevr-poc"
    assert parse_scene(_scene_dict()).vocabulary is CLEVR


def test_malformed_json_file_names_the_line(tmp_path):
    path = tmp_path / "scenes.json"
    path.write_text('{"scenes": [\n {"objects": [}\n]}')
    with pytest.raises(InputError, match=r"scenes.json: invalid JSON at line 2"):
        load_scenes(path)


def test_bad_relationship_indices_are_rejected():
    data = _scene_dict()
    data["relationships"] = {"left": [[5], []]}
    with pytest.raises(InputError, match="relationships.left holds an index outside 0..1"):
        parse_scene(data, "s.json", 3)


def test_with_coords_moves_and_recomputes(clevr_real):
    scene = load_scenes(clevr_real / "CLEVR_val_scenes_sample11.json")[0]
    coords = scene.coords()
    coords[0, :2] = [2.5, 2.5]
    moved = scene.with_coords(coords)
    assert moved.objects[0].coords[:2] == (2.5, 2.5)
    assert scene.objects[0].coords[:2] != (2.5, 2.5)
    assert moved.relationships == moved.computed_relationships()
    assert moved.relationships != scene.relationships
