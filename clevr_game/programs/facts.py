"""Precomputed scene facts: what the fast executor reads instead of the scene.

Object sets are Python ints used as bit sets (bit i = object i): filtering is `&`,
counting is `int.bit_count`, and a set of a few dozen objects is one machine word.

- `masks[a][value]`: the objects whose attribute ATTRIBUTES[a] is `value` (every
  value of every known vocabulary is a key; use `.get(value, 0)` for others);
- `values[a][i]`: the value of attribute ATTRIBUTES[a] of object i;
- `related[RELATION_COUNT * i + r]`: the objects that are RELATIONS[r] of object i.

A move of the game changes coordinates only, and a program asks for the relations
of one or two objects, so relation rows are computed when first read (CLEVR's own
arithmetic, in plain Python: cheaper than numpy's call overhead at this size),
and the attribute part of `from_arrays` is remembered per attribute array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clevr_game.errors import InputError
from clevr_game.scene import RELATION_THRESHOLD, Scene, parse_scene
from clevr_game.vocab import ATTRIBUTES, RELATIONS, VOCABULARIES, Vocabulary

Directions = tuple[tuple[float, float, float], ...]
"""The four relation directions in RELATIONS order, as float triples."""

DirectionsLike = Mapping[str, Sequence[float]] | np.ndarray | Directions

RELATION_COUNT = len(RELATIONS)
"""Relations of object i are stored under keys RELATION_COUNT * i + r."""


def _known_values() -> tuple[tuple[str, ...], ...]:
    return tuple(
        tuple(dict.fromkeys(v for vocabulary in VOCABULARIES.values() for v in vocabulary.values(a)))
        for a in ATTRIBUTES
    )


KNOWN_VALUES: tuple[tuple[str, ...], ...] = _known_values()
"""Per attribute, every value of every registered vocabulary: each is a key of every
`masks[a]`, so compiled programs read them with a plain subscript."""


class Relations(dict[int, int]):
    """Key RELATION_COUNT * i + r -> the objects that are RELATIONS[r] of object i, computed on first read.

    One flat dict per scene rather than one per relation: a move builds a new one,
    and one object costs less to create than four.
    """

    __slots__ = ("coords", "directions")

    def __missing__(self, key: int) -> int:
        coords = self.coords
        if type(coords) is not list:
            # Converted on the first relation read: many programs never relate.
            coords = self.coords = coords.tolist()
        index, relation = divmod(key, RELATION_COUNT)
        x, y, z = coords[index]
        dx, dy, dz = self.directions[relation]
        mask, bit = 0, 1
        # Difference first, then the dot product, summed left to right: CLEVR's arithmetic.
        for xj, yj, zj in coords:
            if (xj - x) * dx + (yj - y) * dy + (zj - z) * dz > RELATION_THRESHOLD:
                mask |= bit
            bit <<= 1
        self[key] = mask
        return mask


def _relations(coords: np.ndarray | list[list[float]], directions: Directions) -> Relations:
    relations = Relations()
    relations.coords = coords
    relations.directions = directions
    return relations


def relation_directions(directions: DirectionsLike) -> Directions:
    """Directions in the executor's form: from a dict like Scene.directions or a (4, 3) array.

    Converting costs a few microseconds; a caller on the hot path converts once.
    """
    if isinstance(directions, tuple) and len(directions) == len(RELATIONS):
        return directions
    if isinstance(directions, np.ndarray):
        if directions.shape != (len(RELATIONS), 3):
            raise InputError(f"directions: expected a (4, 3) array in RELATIONS order, got shape {directions.shape}")
        return tuple((float(x), float(y), float(z)) for x, y, z in directions.tolist())
    missing = [r for r in RELATIONS if r not in directions]
    if missing:
        raise InputError(f"directions: missing {', '.join(missing)}")
    vectors = []
    for rel in RELATIONS:
        vector = directions[rel]
        if len(vector) != 3:
            raise InputError(f"directions: {rel} must have 3 components, got {len(vector)}")
        vectors.append((float(vector[0]), float(vector[1]), float(vector[2])))
    return tuple(vectors)


def _coordinate_rows(coords: Any, count: int) -> np.ndarray:
    # A copy: the caller may reuse its buffer before the relations are read.
    rows = np.array(coords, dtype=np.float64)
    if rows.shape != (count, 3):
        raise InputError(f"coords: expected shape ({count}, 3), got {rows.shape}")
    return rows


def relation_masks(coords: Any, directions: DirectionsLike) -> list[list[int]]:
    """All rows at once: related[r][i] = objects j with (c_j - c_i) . d_r > 0.2."""
    rows = _coordinate_rows(coords, len(coords))
    relations = _relations(rows, relation_directions(directions))
    return [[relations[RELATION_COUNT * i + r] for i in range(len(rows))] for r in range(RELATION_COUNT)]


_Attributes = tuple[tuple[dict[str, int], ...], tuple[list[str], ...]]


def _attributes_from_values(values: tuple[list[str], ...], vocabulary: Vocabulary) -> _Attributes:
    masks = []
    for a, (attribute, column) in enumerate(zip(ATTRIBUTES, values, strict=True)):
        by_value = dict.fromkeys(KNOWN_VALUES[a], 0)
        by_value.update(dict.fromkeys(vocabulary.values(attribute), 0))
        for index, value in enumerate(column):
            if value not in by_value:
                raise InputError(f"object {index}: unknown {attribute} {value!r} for vocabulary {vocabulary.name}")
            by_value[value] |= 1 << index
        masks.append(by_value)
    return tuple(masks), values


def _attributes_from_ids(ids: np.ndarray, vocabulary: Vocabulary) -> _Attributes:
    if ids.ndim != 2 or ids.shape[1] != len(ATTRIBUTES):
        raise InputError(f"attribute_ids: expected shape (N, {len(ATTRIBUTES)}), got {ids.shape}")
    columns = []
    for attribute, column in zip(ATTRIBUTES, ids.T.tolist(), strict=True):
        names = vocabulary.values(attribute)
        if column and (min(column) < 0 or max(column) >= len(names)):
            raise InputError(f"attribute_ids: a {attribute} id is outside the {vocabulary.name} vocabulary")
        columns.append([names[k] for k in column])
    return _attributes_from_values(tuple(columns), vocabulary)


# The attribute part of from_arrays by (vocabulary, ids): a game item's attributes
# never change, so every move after the first finds its part here. Entries are
# immutable and the vocabulary is kept in them, so its id cannot be reused.
_ATTRIBUTE_CACHE: dict[tuple[int, int, bytes], tuple[Vocabulary, _Attributes]] = {}
_ATTRIBUTE_CACHE_LIMIT = 8192


def _cached_attributes(ids: Any, vocabulary: Vocabulary) -> _Attributes:
    array = np.ascontiguousarray(ids, dtype=np.int64)
    key = (id(vocabulary), len(array), array.tobytes())
    entry = _ATTRIBUTE_CACHE.get(key)
    if entry is not None and entry[0] is vocabulary:
        return entry[1]
    attributes = _attributes_from_ids(array, vocabulary)
    if len(_ATTRIBUTE_CACHE) >= _ATTRIBUTE_CACHE_LIMIT:
        _ATTRIBUTE_CACHE.clear()
    _ATTRIBUTE_CACHE[key] = (vocabulary, attributes)
    return attributes


class SceneFacts:
    """Everything the executor needs from one scene, as bit sets (see the module doc).

    Read-only once built: the dicts and lists inside are shared between the facts
    of one scene's moves.
    """

    __slots__ = ("count", "everything", "masks", "values", "related", "vocabulary", "directions")

    def __init__(
        self,
        attributes: _Attributes,
        related: Relations,
        vocabulary: Vocabulary,
        directions: Directions,
    ) -> None:
        self.masks, self.values = attributes
        self.count = len(self.values[0])
        self.everything = (1 << self.count) - 1
        self.related = related
        self.vocabulary = vocabulary
        self.directions = directions  # kept so that a move computes relations alike

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

        `directions`: a dict like Scene.directions, a (4, 3) array, or (fastest)
        the tuple `relation_directions(...)` gives.
        """
        attributes = _cached_attributes(attribute_ids, vocabulary)
        rows = _coordinate_rows(coords, len(attributes[1][0]))
        directions = relation_directions(directions)
        return cls(attributes, _relations(rows, directions), vocabulary, directions)

    def with_coords(self, coords: np.ndarray, directions: DirectionsLike | None = None) -> SceneFacts:
        """The same objects moved to `coords` (N, 3): only the relations change."""
        rows = _coordinate_rows(coords, self.count)
        directions = self.directions if directions is None else relation_directions(directions)
        return SceneFacts((self.masks, self.values), _relations(rows, directions), self.vocabulary, directions)

    # ------------------------------------------------------------ reading

    def value_mask(self, attribute: str, value: str) -> int:
        """Objects whose `attribute` is `value` (0 for a value no object has)."""
        return self.masks[ATTRIBUTES.index(attribute)].get(value, 0)

    def same_as(self, attribute: str, index: int) -> int:
        """The other objects with the same `attribute` value as object `index`."""
        a = ATTRIBUTES.index(attribute)
        return self.masks[a][self.values[a][index]] & ~(1 << index)

    def relate(self, relation: str, index: int) -> int:
        """The objects that are `relation` of object `index`."""
        return self.related[RELATION_COUNT * index + RELATIONS.index(relation)]

    def relation_rows(self) -> list[list[int]]:
        """Per relation (RELATIONS order), per object, the related objects; all computed."""
        return [[self.related[RELATION_COUNT * i + r] for i in range(self.count)] for r in range(RELATION_COUNT)]

    def relationships(self) -> dict[str, list[list[int]]]:
        """CLEVR's `relationships` form: rel -> per object the sorted related indices."""
        return {
            rel: [[j for j in range(self.count) if row >> j & 1] for row in rows]
            for rel, rows in zip(RELATIONS, self.relation_rows(), strict=True)
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SceneFacts):
            return NotImplemented
        return (
            self.count == other.count
            and self.masks == other.masks
            and self.values == other.values
            and self.relation_rows() == other.relation_rows()
            and self.vocabulary == other.vocabulary
        )

    __hash__ = None  # type: ignore[assignment]  # equality by content, which is not hashed

    def __repr__(self) -> str:
        return f"SceneFacts(count={self.count}, vocabulary={self.vocabulary.name!r})"


def _stored_relations(stored: dict[str, list[list[int]]], rows: np.ndarray, directions: Directions) -> Relations:
    relations = _relations(rows, directions)
    for r, rel in enumerate(RELATIONS):
        for i, indices in enumerate(stored[rel]):
            mask = 0
            for j in indices:
                mask |= 1 << j
            relations[RELATION_COUNT * i + r] = mask
    return relations


def compile_scene(scene: Scene) -> SceneFacts:
    """Facts of a Scene; its stored `relationships` are used when present, as CLEVR does."""
    values = tuple([obj.attribute(a) for obj in scene.objects] for a in ATTRIBUTES)
    attributes = _attributes_from_values(values, scene.vocabulary)
    rows = _coordinate_rows(scene.coords(), len(scene))
    directions = relation_directions(scene.directions)
    stored = scene.relationships
    if stored is not None and all(rel in stored for rel in RELATIONS):
        related = _stored_relations(stored, rows, directions)
    else:
        related = _relations(rows, directions)
    return SceneFacts(attributes, related, scene.vocabulary, directions)


def compile_scene_dict(data: Any, vocabulary: Vocabulary | None = None, source: str | None = None) -> SceneFacts:
    """Facts of a CLEVR scene dict (validated: InputError names the scene, object and field)."""
    return compile_scene(parse_scene(data, source, vocabulary=vocabulary))
