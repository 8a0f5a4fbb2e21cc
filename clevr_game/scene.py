"""Scenes and objects; CLEVR scene JSON in and out; directions (from clevr_game.camera), relationships.

Real CLEVR files load unchanged and are written back with the same keys, so what
this project writes loads in other CLEVR tools. Unknown keys (`region`, `mask`,
...) are kept for the round trip.
"""

from __future__ import annotations

import json
import math
import os
import reprlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.asp.regions import regions_of

# The atomic writers and the camera are re-exported: many modules import them from here.
from clevr_game.atomic import new_file_mode as new_file_mode
from clevr_game.atomic import write_json_atomic as write_json_atomic
from clevr_game.atomic import write_text_atomic as write_text_atomic
from clevr_game.camera import CAMERA_LENS_MM as CAMERA_LENS_MM
from clevr_game.camera import CAMERA_MATRIX_WORLD as CAMERA_MATRIX_WORLD
from clevr_game.camera import CAMERA_SENSOR_WIDTH_MM as CAMERA_SENSOR_WIDTH_MM
from clevr_game.camera import DEFAULT_DIRECTIONS as DEFAULT_DIRECTIONS
from clevr_game.camera import IMAGE_HEIGHT as IMAGE_HEIGHT
from clevr_game.camera import IMAGE_WIDTH as IMAGE_WIDTH
from clevr_game.camera import camera_directions as camera_directions
from clevr_game.camera import project_to_pixels as project_to_pixels
from clevr_game.errors import InputError, located
from clevr_game.vocab import ATTRIBUTES, CLEVR, RELATIONS, Vocabulary, get_vocabulary

RELATION_THRESHOLD = 0.2
"""Object j is `<rel>` of i when (c_j - c_i) . d_rel > this (CLEVR's own rule)."""

MAX_OBJECTS = 10
"""CLEVR's most objects in one scene; the game's heads and a state player's slots are sized by it."""

MAX_ABS_COORD = 1000.0
"""A 3d coordinate farther from the centre is refused on reading. CLEVR's board is (-3, 3); a
scene that breaks that is reported by the placement rules, but a coordinate such as 1e308 is no
scene at all: squared distances overflow and relations stop meaning anything."""

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects kept from untrusted JSON (extra scene fields, a player's
answers). CLEVR's own files nest 5 levels; anything kept deeper would make a later repr or
json.dumps of it fail with RecursionError far from where it was read."""

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 60, 60
_SHOWN.maxlist = _SHOWN.maxdict = _SHOWN.maxtuple = 6


def shown_value(value: Any) -> str:
    """A short repr of a bad value for an error line: a 64 MB list or a deep nest is shown in a few characters."""
    return _SHOWN.repr(value)


def nested_deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when decoded JSON nests lists and dicts more than `limit` levels (a scalar is level 0)."""
    # A loop with its own stack: the point is to never recurse on untrusted depth.
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if type(node) is dict:
            node = node.values()
        elif type(node) is not list:
            continue
        if depth == limit:
            return True
        stack.extend((child, depth + 1) for child in node if type(child) is list or type(child) is dict)
    return False


def relation_matrices(coords: np.ndarray, directions: dict[str, Any]) -> dict[str, np.ndarray]:
    """rel -> (N, N) bool, M[i, j] true when object j is `rel` of object i."""
    coords = np.asarray(coords, dtype=np.float64)
    delta = coords[None, :, :] - coords[:, None, :]  # delta[i, j] = c_j - c_i
    return {
        rel: (delta @ np.asarray(directions[rel], dtype=np.float64)) > RELATION_THRESHOLD
        for rel in RELATIONS
    }


def relationships_from_matrices(matrices: dict[str, np.ndarray]) -> dict[str, list[list[int]]]:
    # Plain Python over tolist() beats one numpy call per row for CLEVR's 3 to 10 objects.
    return {
        rel: [[j for j, hit in enumerate(row) if hit] for row in matrix.tolist()]
        for rel, matrix in matrices.items()
    }


@dataclass
class SceneObject:
    size: str
    color: str
    material: str
    shape: str
    coords: tuple[float, float, float]
    rotation: float = 0.0
    pixel_coords: tuple[float, float, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def attribute(self, name: str) -> str:
        return getattr(self, name)

    def describe(self) -> str:
        """`small red metal cube`."""
        return f"{self.size} {self.color} {self.material} {self.shape}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "color": self.color,
            "size": self.size,
            "rotation": self.rotation,
            "shape": self.shape,
            "3d_coords": list(self.coords),
            "material": self.material,
        }
        if self.pixel_coords is not None:
            out["pixel_coords"] = list(self.pixel_coords)
        out.update(self.extra)
        return out


@dataclass
class Scene:
    objects: list[SceneObject]
    directions: dict[str, tuple[float, float, float]] = field(
        default_factory=lambda: dict(DEFAULT_DIRECTIONS)
    )
    vocabulary: Vocabulary = CLEVR
    image_index: int | None = None
    image_filename: str | None = None
    split: str | None = None
    relationships: dict[str, list[list[int]]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.objects)

    def coords(self) -> np.ndarray:
        """(N, 3) float64 world coordinates."""
        return np.array([o.coords for o in self.objects], dtype=np.float64).reshape(-1, 3)

    def attribute_ids(self) -> np.ndarray:
        """(N, 4) int64 value ids in ATTRIBUTES order, against this scene's vocabulary."""
        return np.array(
            [[self.vocabulary.index(a, o.attribute(a)) for a in ATTRIBUTES] for o in self.objects],
            dtype=np.int64,
        ).reshape(-1, len(ATTRIBUTES))

    def radii(self) -> np.ndarray:
        return np.array([self.vocabulary.radius(o.size) for o in self.objects], dtype=np.float64)

    def relation_matrices(self) -> dict[str, np.ndarray]:
        return relation_matrices(self.coords(), self.directions)

    def computed_relationships(self) -> dict[str, list[list[int]]]:
        return relationships_from_matrices(self.relation_matrices())

    def with_coords(
        self,
        coords: np.ndarray,
        *,
        pixel_coords: np.ndarray | bool = True,
        relationships: dict[str, list[list[int]]] | None = None,
        compute_relationships: bool = True,
    ) -> Scene:
        """A copy with objects moved to `coords` (N, 2 or 3).

        Pixel coordinates are projected (or taken from an (N, 3) array a caller
        projected in bulk) and relationships recomputed (or taken as given, or left
        to `to_json` when `compute_relationships` is false). A `region` field (CLEVR-POC)
        is set to the region of the new centre.
        """
        coords = np.asarray(coords, dtype=np.float64)
        xyz = coords if coords.shape[1] > 2 else np.column_stack([coords, self.coords()[:, 2]])
        if pixel_coords is True:
            pixel_coords = project_to_pixels(xyz) if len(xyz) else None
        pixels = pixel_coords.tolist() if isinstance(pixel_coords, np.ndarray) else None
        extras = [dict(obj.extra) for obj in self.objects]
        if any("region" in extra for extra in extras):
            # A CLEVR-POC object's region follows from its centre: a moved object carries its new one.
            for extra, region in zip(extras, regions_of(xyz, self.directions).tolist(), strict=True):
                if "region" in extra:
                    extra["region"] = region
        objects = [
            SceneObject(
                obj.size, obj.color, obj.material, obj.shape, (p[0], p[1], p[2]), obj.rotation,
                (int(pixels[i][0]), int(pixels[i][1]), pixels[i][2]) if pixels else obj.pixel_coords,
                extras[i],
            )
            for i, (obj, p) in enumerate(zip(self.objects, xyz.tolist(), strict=True))
        ]
        moved = Scene(
            objects, dict(self.directions), self.vocabulary, self.image_index,
            self.image_filename, self.split, relationships, dict(self.extra),
        )
        if relationships is None and compute_relationships:
            moved.relationships = moved.computed_relationships()
        return moved

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.image_index is not None:
            out["image_index"] = self.image_index
        out["objects"] = [o.to_json() for o in self.objects]
        rels = self.relationships if self.relationships is not None else self.computed_relationships()
        out["relationships"] = rels
        if self.image_filename is not None:
            out["image_filename"] = self.image_filename
        if self.split is not None:
            out["split"] = self.split
        out["directions"] = {k: list(v) for k, v in self.directions.items()}
        if self.vocabulary is not CLEVR:
            out["vocabulary"] = self.vocabulary.name
        out.update(self.extra)
        return out


# ---------------------------------------------------------------- parsing

_OBJECT_KEYS = {"size", "color", "material", "shape", "3d_coords", "rotation", "pixel_coords"}
_SCENE_KEYS = {"objects", "directions", "relationships", "image_index", "image_filename", "split", "vocabulary"}


def _number(value: Any, where: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: {name} must be a finite number, got {shown_value(value)}")
    return float(value)


def _vector(value: Any, where: str, name: str, length: int) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or len(value) != length:
        raise InputError(f"{where}: {name} must be a list of {length} numbers, got {shown_value(value)}")
    return tuple(_number(x, where, name) for x in value)


def _kept_extras(data: dict[str, Any], known: set[str], where: str) -> dict[str, Any]:
    """The unknown fields of a scene or object, kept for the round trip once their depth is checked."""
    extra = {k: v for k, v in data.items() if k not in known}
    for key, value in extra.items():
        if nested_deeper_than(value):
            raise InputError(f"{where}: field {shown_value(key)} nests lists or dicts more than {MAX_JSON_DEPTH} levels deep")
    return extra


def parse_object(data: Any, vocabulary: Vocabulary, where: str) -> SceneObject:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object (JSON dict), got {type(data).__name__}")
    values = {}
    for attribute in ATTRIBUTES:
        if attribute not in data:
            raise InputError(f"{where}: missing field '{attribute}'")
        value = data[attribute]
        if not isinstance(value, str):
            raise InputError(f"{where}: {attribute} must be a string, got {shown_value(value)}")
        try:
            vocabulary.index(attribute, value)
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
        values[attribute] = value
    if "3d_coords" not in data:
        raise InputError(f"{where}: missing field '3d_coords'")
    coords = _vector(data["3d_coords"], where, "3d_coords", 3)
    if any(abs(c) > MAX_ABS_COORD for c in coords):
        raise InputError(f"{where}: 3d_coords {shown_value(list(coords))} lie outside any CLEVR world "
                         f"(each coordinate must be within +-{MAX_ABS_COORD:g}; the board is (-3, 3))")
    rotation = data.get("rotation", 0.0)
    _number(rotation, where, "rotation")
    pixel = data.get("pixel_coords")
    if pixel is not None:
        _vector(pixel, where, "pixel_coords", 3)
    pixel_coords = tuple(pixel) if pixel is not None else None  # ints stay ints on the way out
    extra = _kept_extras(data, _OBJECT_KEYS, where)
    return SceneObject(coords=coords, rotation=rotation, pixel_coords=pixel_coords, extra=extra, **values)


def parse_scene(
    data: Any, source: str | None = None, index: int | None = None, vocabulary: Vocabulary | None = None
) -> Scene:
    """One CLEVR scene dict -> Scene; InputError names source, scene and object."""
    scene_where = located(source, f"scene {index}" if index is not None else "")
    if not isinstance(data, dict):
        raise InputError(f"{scene_where}: expected a scene (JSON dict), got {type(data).__name__}")
    if vocabulary is None:
        name = data.get("vocabulary", CLEVR.name)
        try:
            vocabulary = get_vocabulary(name) if isinstance(name, str) else get_vocabulary(repr(name))
        except ValueError as exc:
            raise InputError(f"{scene_where}: {exc}") from None
    objects_data = data.get("objects")
    if not isinstance(objects_data, list):
        raise InputError(f"{scene_where}: missing or malformed field 'objects' (expected a list)")
    objects = [
        parse_object(obj, vocabulary, located(source, f"scene {index}" if index is not None else "", f"object {i}"))
        for i, obj in enumerate(objects_data)
    ]
    directions = dict(DEFAULT_DIRECTIONS)
    if "directions" in data:
        raw = data["directions"]
        if not isinstance(raw, dict):
            raise InputError(f"{scene_where}: directions must be a dict")
        for rel, vec in raw.items():
            _vector(vec, scene_where, f"directions.{rel}", 3)
            directions[rel] = tuple(vec)  # as written, so ints stay ints on the way out
    relationships = data.get("relationships")
    if relationships is not None:
        _check_relationships(relationships, len(objects), scene_where)
    image_index = data.get("image_index")
    if image_index is not None and (isinstance(image_index, bool) or not isinstance(image_index, int)):
        raise InputError(f"{scene_where}: image_index must be an integer, got {shown_value(image_index)}")
    for name in ("image_filename", "split"):  # they become file names when rendered
        if data.get(name) is not None and not isinstance(data[name], str):
            raise InputError(f"{scene_where}: {name} must be a string, got {shown_value(data[name])}")
    extra = _kept_extras(data, _SCENE_KEYS, scene_where)
    return Scene(
        objects=objects,
        directions=directions,
        vocabulary=vocabulary,
        image_index=image_index,
        image_filename=data.get("image_filename"),
        split=data.get("split"),
        relationships=relationships,
        extra=extra,
    )


def _check_relationships(relationships: Any, n: int, where: str) -> None:
    if not isinstance(relationships, dict):
        raise InputError(f"{where}: relationships must be a dict")
    for rel, rows in relationships.items():
        if not isinstance(rows, list) or len(rows) != n:
            raise InputError(f"{where}: relationships.{rel} must be a list of {n} lists")
        for row in rows:
            if not isinstance(row, list) or any(
                isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n for j in row
            ):
                raise InputError(f"{where}: relationships.{rel} holds an index outside 0..{n - 1}")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Load JSON; InputError names the file and the line of a syntax error."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        # No CLEVR file nests more than a few levels: this is a hostile or broken file, not a big one.
        raise InputError(f"{path}: JSON nested too deeply to read (arrays or objects about 1000 levels deep)") from None


def load_scenes(path: str | os.PathLike[str], vocabulary: Vocabulary | None = None) -> list[Scene]:
    """A CLEVR `{"info", "scenes"}` file, a list of scenes, or a single scene."""
    data = read_json(path)
    name = Path(path).name
    if isinstance(data, dict) and "scenes" in data:
        scenes = data["scenes"]
        if not isinstance(scenes, list):
            raise InputError(f"{name}: 'scenes' must be a list")
        return _check_scenes([parse_scene(s, name, i, vocabulary) for i, s in enumerate(scenes)], name, True)
    if isinstance(data, list):
        return _check_scenes([parse_scene(s, name, i, vocabulary) for i, s in enumerate(data)], name, True)
    if isinstance(data, dict) and "objects" in data:
        return _check_scenes([parse_scene(data, name, None, vocabulary)], name, False)
    raise InputError(f"{name}: expected a CLEVR scenes file (with 'scenes') or a single scene (with 'objects')")


def _check_scenes(scenes: list[Scene], name: str, numbered: bool) -> list[Scene]:
    """Every scene has an object and its own image_index (else later lookups pick one silently).

    A scene without image_index is looked up by its position, as `match_scenes` does.
    """
    first_at: dict[int, int] = {}
    for position, scene in enumerate(scenes):
        key = scene.image_index if scene.image_index is not None else position
        if not scene.objects:
            label = f"scene {position}" if numbered else ""
            if numbered and scene.image_index is not None and scene.image_index != position:
                label += f" (image_index {scene.image_index})"
            raise InputError(f"{located(name, label)}: no objects (a scene needs at least one)")
        if key in first_at:
            earlier = scenes[first_at[key]]
            why = "" if earlier.image_index is not None and scene.image_index is not None else (
                " (a scene without image_index counts as its position)")
            raise InputError(f"{name}: scenes {first_at[key]} and {position} both have image_index {key}{why}")
        first_at[key] = position
    return scenes


def load_scenes_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    data = read_json(path)
    return data.get("info", {}) if isinstance(data, dict) else {}


def save_scenes(
    path: str | os.PathLike[str], scenes: Iterable[Scene], info: dict[str, Any] | None = None
) -> None:
    write_json_atomic(path, {"info": info or {}, "scenes": [s.to_json() for s in scenes]})
