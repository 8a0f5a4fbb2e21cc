"""What question generation needs to know about one scene, as int bitmasks (bit i = object i).

A filter *key* is one value or None per attribute (size, color, material, shape);
every key of the vocabulary gets its match set once per scene, so choosing a
filter later is a bitwise AND and a table look-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product

import numpy as np

from clevr_game.errors import InputError
from clevr_game.scene import Scene
from clevr_game.vocab import ATTRIBUTES, RELATIONS, Vocabulary

Key = tuple[str | None, ...]


@dataclass(frozen=True)
class KeyTable:
    """Every filter key of a vocabulary, in `product((None, *values) per attribute)` order."""

    keys: tuple[Key, ...]
    index: dict[Key, int]
    drop_one: tuple[tuple[int, ...], ...]
    """For each key, the keys with exactly one of its values removed."""
    within: dict[int, tuple[int, ...]]
    """Bitset of allowed attribute positions -> keys that set values only there."""
    strides: tuple[int, ...]
    """Key index = sum over attributes of (value position + 1, or 0 for None) x stride."""
    positions: tuple[int, ...]
    """For each key, the bitset of the attribute positions it sets."""
    radices: tuple[int, ...]
    """Per attribute, its number of values plus one (None)."""


@lru_cache(maxsize=8)
def key_table(vocabulary: Vocabulary) -> KeyTable:
    options = [(None, *vocabulary.values(a)) for a in ATTRIBUTES]
    keys = tuple(product(*options))
    index = {k: i for i, k in enumerate(keys)}
    drop_one = tuple(
        tuple(index[k[:j] + (None,) + k[j + 1:]] for j in range(len(ATTRIBUTES)) if k[j] is not None)
        for k in keys
    )
    positions = [sum(1 << j for j, v in enumerate(k) if v is not None) for k in keys]
    within = {
        allowed: tuple(i for i, p in enumerate(positions) if p & ~allowed == 0)
        for allowed in range(1 << len(ATTRIBUTES))
    }
    strides = tuple(
        int(np.prod([len(options[j]) for j in range(i + 1, len(options))], dtype=np.int64))
        for i in range(len(options))
    )
    radices = tuple(len(o) for o in options)
    return KeyTable(keys, index, drop_one, within, strides, tuple(positions), radices)


class GenerationFacts:
    """One scene's objects, relations and filter-key match sets as bitmasks."""

    def __init__(self, scene: Scene, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.table = key_table(vocabulary)
        objects = scene.objects
        self.num_objects = len(objects)
        self.all = (1 << len(objects)) - 1
        self.values: list[tuple[str, ...]] = [tuple(o.attribute(a) for a in ATTRIBUTES) for o in objects]
        where = f"scene {scene.image_index}" if scene.image_index is not None else "scene"
        self.value_masks: dict[str, dict[str, int]] = {a: dict.fromkeys(vocabulary.values(a), 0) for a in ATTRIBUTES}
        for i, values in enumerate(self.values):
            for attribute, value in zip(ATTRIBUTES, values, strict=True):
                if value not in self.value_masks[attribute]:
                    raise InputError(
                        f"{where}: object {i} has {attribute} {value!r}, outside the {vocabulary.name} vocabulary"
                    )
                self.value_masks[attribute][value] |= 1 << i
        relationships = scene.relationships if scene.relationships is not None else scene.computed_relationships()
        self.relate: dict[str, list[int]] = {}
        for relation in RELATIONS:
            rows = relationships.get(relation)
            if rows is None or len(rows) != len(objects):
                raise InputError(f"{where}: relationships.{relation} missing or of the wrong length")
            self.relate[relation] = [sum(1 << j for j in row) for row in rows]
        self.same: dict[str, list[int]] = {
            a: [self.value_masks[a][values[p]] & ~(1 << i) for i, values in enumerate(self.values)]
            for p, a in enumerate(ATTRIBUTES)
        }
        masks = [self.all]
        for attribute in ATTRIBUTES:
            choices = [self.all, *self.value_masks[attribute].values()]
            masks = [m & c for m in masks for c in choices]
        self.key_masks: list[int] = masks
        # Each object's own keys: its values kept at some attribute positions, as (positions, key index).
        # Key indices are mixed-radix numbers (digit 0 = None), the order of `product` in key_table.
        digits = [
            [vocabulary.values(a).index(v) + 1 for a, v in zip(ATTRIBUTES, values, strict=True)]
            for values in self.values
        ]
        strides = self.table.strides
        self.object_keys: list[list[tuple[int, int]]] = []
        for own in digits:
            parts = [d * stride for d, stride in zip(own, strides, strict=True)]
            keys = [0] * (1 << len(ATTRIBUTES))
            for positions in range(1, len(keys)):
                low = positions & -positions
                keys[positions] = keys[positions ^ low] + parts[low.bit_length() - 1]
            self.object_keys.append(list(enumerate(keys)))
        self.scene_keys: tuple[int, ...] = tuple(sorted({k for keys in self.object_keys for _, k in keys}))
        """The keys that describe some object of the scene (CLEVR's filter options), in key order."""
        self._options: dict[tuple[int, int, bool, bool], list[tuple[int, int]]] = {}
        self.memo: dict[tuple, object] = {}
        """Option sets of CLEVR's sampling (questions/clevr_search.py), kept for the other templates of the scene."""

    def filter_options(self, within: int, allowed: int, unique: bool, allow_null: bool) -> list[tuple[int, int]]:
        """(key index, match set) for every key that may filter `within` without a redundant value.

        A value is redundant when dropping it leaves the match set unchanged; this
        rules out "the large red cube" where "the red cube" already says it, and
        "no" answers whose filter could be shortened without changing them.
        `allowed` is the bitset of attribute positions a key may set (NULL
        constraints clear bits); `unique` keeps single matches only.
        """
        memo_key = (within, allowed, unique, allow_null)
        cached = self._options.get(memo_key)
        if cached is None:
            if unique:
                cached = self._unique_options(within, allowed, allow_null)
            else:
                cached = self._all_options(within, allowed, allow_null)
            self._options[memo_key] = cached
        return cached

    def _unique_options(self, within: int, allowed: int, allow_null: bool) -> list[tuple[int, int]]:
        # A key that matches exactly one object is among that object's own 16 masked keys,
        # so only those are tried (each is found once: from its single match).
        key_masks = self.key_masks
        drop_one = self.table.drop_one
        options = []
        remaining = within
        while remaining:
            low = remaining & -remaining
            remaining ^= low
            for positions, k in self.object_keys[low.bit_length() - 1]:
                if positions & ~allowed or (k == 0 and not allow_null):
                    continue
                if within & key_masks[k] != low:
                    continue
                for d in drop_one[k]:
                    if within & key_masks[d] == low:
                        break
                else:
                    options.append((k, low))
        options.sort()
        return options

    def _all_options(self, within: int, allowed: int, allow_null: bool) -> list[tuple[int, int]]:
        matched = [within & m for m in self.key_masks]
        drop_one = self.table.drop_one
        options = []
        for k in self.table.within[allowed]:
            here = matched[k]
            for d in drop_one[k]:
                if matched[d] == here:
                    break
            else:
                if k or allow_null:
                    options.append((k, here))
        return options
