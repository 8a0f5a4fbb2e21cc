"""Precomputed scene facts: what the fast executor reads instead of the scene.

Object sets are Python ints used as bit sets (bit i = object i): filtering is `&`,
counting is `int.bit_count`, and a set of at most a few dozen objects costs one
machine word. Everything a program can ask of a scene is computed here once:

- `masks`: "attribute:value" -> set of objects with that value (every value of the
  vocabulary is present, unseen ones with 0; unknown keys read as 0);
- `values[a][i]`: the value of attribute ATTRIBUTES[a] of object i;
- `same[a][i]`: the other objects sharing that value with object i;
- `related[r][i]`: the objects that are RELATIONS[r] of object i.

`SceneFacts.from_arrays` is the game's per-move constructor, vectorised with numpy;
`with_coords` recomputes only the relations, since a move changes nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clevr_game.errors import InputError
from clevr_game.scene import RELATION_THRESHOLD, Scene, parse_scene
from clevr_game.vocab import ATTRIBUTES, RELATIONS, Vocabulary

MAX_OBJECTS = 53
"""Bit sets are packed through float64 dot products, exact up to 2**53."""

DirectionsLike = Mapping[str, Sequence[float]] | np.ndarray


def mask_key(attribute: str, value: str) -> str:
    """The key of `SceneFacts.masks` for one attribute value."""
    return f"{attribute}:{value}"


class ValueMasks(dict[str, int]):
    """A dict whose missing keys read as the empty set, so unknown values filter to nothing."""

    def __missing__(self, key: str) -> int:
        return 0


class _VocabularyLayout:
    """Every value of a vocabulary numbered in one range: attribute a's value k is offsets[a] + k."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        per_attribute = [vocabulary.values(a) for a in ATTRIBUTES]
        self.vocabulary = vocabulary
        self.sizes = np.array([len(v) for v in per_attribute], dtype=np.uint64)
        self.offsets = np.cumsum([0] + [len(v) for v in per_attribute[:-1]]).astype(np.int64)
        self.keys = [mask_key(a, v) for a, values in zip(ATTRIBUTES, per_attribute, strict=True) for v in values]
        self.value_array = np.array([v for values in per_attribute for v in values], dtype=object)
        self.index = {key: i for i, key in enumerate(self.keys)}


# Keyed by id() with the vocabulary kept alive in the entry: hashing a dataclass on
# every move would cost more than the lookup saves.
_LAYOUTS: dict[int, tuple[Vocabulary, _VocabularyLayout]] = {}


def _layout(vocabulary: Vocabulary) -> _VocabularyLayout:
    entry = _LAYOUTS.get(id(vocabulary))
    if entry is None or entry[0] is not vocabulary:
        entry = (vocabulary, _VocabularyLayout(vocabulary))
        _LAYOUTS[id(vocabulary)] = entry
    return entry[1]


_WEIGHTS: list[np.ndarray] = [2.0 ** np.arange(n) for n in range(MAX_OBJECTS + 1)]
_BITS: list[np.ndarray] = [np.left_shift(1, np.arange(n, dtype=np.int64)) for n in range(MAX_OBJECTS + 1)]


def _check_count(n: int) -> None:
    if n > MAX_OBJECTS:
        raise InputError(f"scene has {n} objects; the executor supports at most {MAX_OBJECTS}")


def direction_matrix(directions: DirectionsLike) -> np.ndarray:
    """(3, 4) float64: column r is the direction of RELATIONS[r]."""
    if isinstance(directions, np.ndarray):
        matrix = np.asarray(directions, dtype=np.float64)
        if matrix.shape == (3, len(RELATIONS)):
            return matrix
        if matrix.shape == (len(RELATIONS), 3):
            return np.ascontiguousarray(matrix.T)
        raise InputError(f"directions: expected a (4, 3) array in RELATIONS order, got shape {matrix.shape}")
    missing = [r for r in RELATIONS if r not in directions]
    if missing:
        raise InputError(f"directions: missing {', '.join(missing)}")
    return np.array([directions[r] for r in RELATIONS], dtype=np.float64).T.copy()


def relation_masks(coords: np.ndarray, directions: DirectionsLike) -> list[list[int]]:
    """related[r][i]: objects j with (c_j - c_i) . d_r > 0.2, as bit sets (CLEVR's rule)."""
    coords = np.asarray(coords, dtype=np.float64)
    n = len(coords)
    _check_count(n)
    matrix = direction_matrix(directions)
    # Difference first, then the dot product: the same arithmetic as
    # clevr_game.scene.relation_matrices, so both agree bit for bit.
    delta = coords[None, :, :] - coords[:, None, :]
    related = (delta @ matrix) > RELATION_THRESHOLD  # related[i, j, r]
    return (related.transpose(2, 0, 1) @ _WEIGHTS[n]).astype(np.int64).tolist()


def _pack_indices(indices: Sequence[int]) -> int:
    mask = 0
    for j in indices:
        mask |= 1 << j
    return mask


class SceneFacts:
    """Everything the executor needs from one scene, as bit sets (see the module doc)."""

    __slots__ = ("count", "everything", "masks", "values", "same", "related", "vocabulary", "directions")

    def __init__(
        self,
        count: int,
        masks: ValueMasks,
        values: list[list[str]],
        same: list[list[int]],
        related: list[list[int]],
        vocabulary: Vocabulary,
        directions: np.ndarray,
    ) -> None:
        self.count = count
        self.everything = (1 << count) - 1
        self.masks = masks
        self.values = values
        self.same = same
        self.related = related
        self.vocabulary = vocabulary
        self.directions = directions  # (3, 4), kept so that a move recomputes relations alike

    # ------------------------------------------------------------ constructors

    @classmethod
    def from_arrays(
        cls,
        attribute_ids: np.ndarray,
        coords: np.ndarray,
        directions: DirectionsLike,
        vocabulary: Vocabulary,
    ) -> SceneFacts:
        """Facts of N objects: ids (N, 4) in ATTRIBUTES order, coords (N, 3), relations computed.

        `directions` is a dict like Scene.directions or, faster, `direction_matrix(...)`.
        """
        ids = np.asarray(attribute_ids, dtype=np.int64)
        n = len(ids)
        _check_count(n)
        layout = _layout(vocabulary)
        if ids.shape != (n, len(ATTRIBUTES)):
            raise InputError(f"attribute_ids: expected shape (N, {len(ATTRIBUTES)}), got {ids.shape}")
        # Negative ids wrap to huge unsigned values, so one comparison checks both ends.
        if (ids.view(np.uint64) >= layout.sizes).any():
            raise InputError(f"attribute_ids: a value id is outside the {vocabulary.name} vocabulary")
        if np.shape(coords) != (n, 3):
            raise InputError(f"coords: expected shape ({n}, 3), got {np.shape(coords)}")
        matrix = direction_matrix(directions)
        value_ids = ids + layout.offsets
        masks = np.bincount(
            value_ids.ravel(), weights=np.repeat(_WEIGHTS[n], len(ATTRIBUTES)), minlength=len(layout.keys)
        ).astype(np.int64)
        same = (masks[value_ids] - _BITS[n][:, None]).T.tolist()
        values = layout.value_array[value_ids.T].tolist()
        return cls(
            n,
            ValueMasks(zip(layout.keys, masks.tolist(), strict=True)),
            values,
            same,
            relation_masks(coords, matrix),
            vocabulary,
            matrix,
        )

    def with_coords(self, coords: np.ndarray, directions: DirectionsLike | None = None) -> SceneFacts:
        """The same objects moved to `coords` (N, 3): only the relations are recomputed."""
        if np.shape(coords) != (self.count, 3):
            raise InputError(f"coords: expected shape ({self.count}, 3), got {np.shape(coords)}")
        matrix = self.directions if directions is None else direction_matrix(directions)
        return SceneFacts(
            self.count, self.masks, self.values, self.same, relation_masks(coords, matrix),
            self.vocabulary, matrix,
        )

    # ------------------------------------------------------------ reading

    def value_mask(self, attribute: str, value: str) -> int:
        """Objects whose `attribute` is `value` (0 for a value no object has)."""
        return self.masks[mask_key(attribute, value)]

    def relationships(self) -> dict[str, list[list[int]]]:
        """CLEVR's `relationships` form: rel -> per object the sorted related indices."""
        return {
            rel: [[j for j in range(self.count) if row >> j & 1] for row in rows]
            for rel, rows in zip(RELATIONS, self.related, strict=True)
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SceneFacts):
            return NotImplemented
        return (
            self.count == other.count
            and self.masks == other.masks
            and self.values == other.values
            and self.same == other.same
            and self.related == other.related
            and self.vocabulary == other.vocabulary
        )

    __hash__ = None  # type: ignore[assignment]  # mutable-looking lists inside: not hashable

    def __repr__(self) -> str:
        return f"SceneFacts(count={self.count}, vocabulary={self.vocabulary.name!r})"


def compile_scene(scene: Scene) -> SceneFacts:
    """Facts of a Scene; its stored `relationships` are used when present, as CLEVR does."""
    n = len(scene)
    _check_count(n)
    layout = _layout(scene.vocabulary)
    masks = ValueMasks.fromkeys(layout.keys, 0)
    values: list[list[str]] = [[obj.attribute(a) for obj in scene.objects] for a in ATTRIBUTES]
    for a, attribute in enumerate(ATTRIBUTES):
        for i, value in enumerate(values[a]):
            masks[mask_key(attribute, value)] |= 1 << i
    same = [
        [masks[mask_key(attribute, value)] & ~(1 << i) for i, value in enumerate(values[a])]
        for a, attribute in enumerate(ATTRIBUTES)
    ]
    matrix = direction_matrix(scene.directions)
    stored = scene.relationships
    if stored is not None and all(rel in stored for rel in RELATIONS):
        related = [[_pack_indices(row) for row in stored[rel]] for rel in RELATIONS]
    else:
        related = relation_masks(scene.coords(), matrix)
    return SceneFacts(n, masks, values, same, related, scene.vocabulary, matrix)


def compile_scene_dict(data: Any, vocabulary: Vocabulary | None = None, source: str | None = None) -> SceneFacts:
    """Facts of a CLEVR scene dict (validated: InputError names the scene, object and field)."""
    return compile_scene(parse_scene(data, source, vocabulary=vocabulary))
