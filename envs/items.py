"""Game items packed for the batched game: ItemPool and what an env accepts as `items`.

Items are the world's (`clevr_game.items`): read from a CLEVR dataset folder
(`scenes.json` + `questions.json`, written by `clevr-game generate` or the real CLEVR
files) or from a CLEVR-POC dataset folder (`items.json` + environments). An ItemPool
packs the scenes into fixed-size numpy arrays once, so the batched game never walks
Python objects on a step.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

from clevr_game.errors import InputError, shown

# The item and its readers are the world's; re-exported for the envs, agents, benchmarks
# and tests that import them from here.
from clevr_game.item_folders import load_items as load_items
from clevr_game.items import Item as Item
from clevr_game.items import answer_kind_problem as answer_kind_problem
from clevr_game.items import check_item_scenes as check_item_scenes
from clevr_game.items import clevr_items as clevr_items
from clevr_game.scene import MAX_OBJECTS
from clevr_game.text import MAX_QUESTION_TOKENS, WordVocabulary, default_word_vocabulary
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC


class ItemPool:
    """Items plus their scenes packed into (I, MAX_OBJECTS, ...) arrays in object order."""

    def __init__(self, items: list[Item], words: WordVocabulary | None = None,
                 question_length: int = MAX_QUESTION_TOKENS):
        if not items:
            raise InputError("no items to play (the item pool is empty)")
        for item in items:  # scene loaders reject these; items built in code reach here directly
            if not item.scene.objects:
                raise InputError(f"item {item.item_id}: the scene has no objects (an item needs at least one)")
        self.items = items
        self.words = words or default_word_vocabulary()
        count = len(items)
        self.num_objects = np.array([len(it.scene) for it in items], dtype=np.int64)
        self.present = np.arange(MAX_OBJECTS)[None, :] < self.num_objects[:, None]
        self.xy = np.zeros((count, MAX_OBJECTS, 2))
        self.z = np.zeros((count, MAX_OBJECTS))
        self.radii = np.zeros((count, MAX_OBJECTS))
        self.attributes = np.zeros((count, MAX_OBJECTS, len(ATTRIBUTES)), dtype=np.int64)
        self.question_tokens = np.zeros((count, question_length), dtype=np.int64)
        self.margin_axes = np.zeros((count, 2, 2))
        self.view_axes = np.zeros((count, 2, 2))  # the camera's right and behind: what the adversary sees
        self.descriptions = [[o.describe() for o in it.scene.objects] for it in items]
        for i, item in enumerate(items):
            n = len(item.scene)
            coords = item.scene.coords()
            self.xy[i, :n] = coords[:, :2]
            self.z[i, :n] = coords[:, 2]
            self.radii[i, :n] = item.scene.radii()
            # CLEVR-POC ids: its value lists extend CLEVR's, so one id means one value everywhere.
            self.attributes[i, :n] = [[CLEVR_POC.index(a, o.attribute(a)) for a in ATTRIBUTES]
                                      for o in item.scene.objects]
            self.question_tokens[i] = self.words.encode(item.question, question_length)
            d = item.scene.directions
            self.margin_axes[i] = [d["left"][:2], d["front"][:2]]
            self.view_axes[i] = [d["right"][:2], d["behind"][:2]]

    def __len__(self) -> int:
        return len(self.items)

    def subset(self, indices: list[int]) -> ItemPool:
        return ItemPool([self.items[i] for i in indices], self.words, self.question_tokens.shape[1])


ItemsLike: TypeAlias = "ItemPool | Sequence[Item] | str | os.PathLike[str]"
"""What an env accepts as `items`: a pool, a list of Items, or an item folder."""


def item_pool(items: ItemsLike, argument: str = "items") -> ItemPool:
    """`items` as an ItemPool; InputError naming `argument` and the value when it is none of `ItemsLike`."""
    if isinstance(items, ItemPool):
        return items
    if isinstance(items, str | os.PathLike):
        try:
            return ItemPool(load_items(items))
        except InputError as exc:
            raise InputError(f"{argument}={shown(items)}: {exc}") from None
    if isinstance(items, Sequence) and not isinstance(items, bytes):
        stranger = next((x for x in items if not isinstance(x, Item)), None)
        if stranger is not None:
            raise InputError(f"{argument}={shown(items)}: a list of items holds {type(stranger).__name__} "
                             f"{shown(stranger)}, expected envs.items.Item")
        try:
            return ItemPool(list(items))
        except InputError as exc:
            raise InputError(f"{argument}={shown(items)}: {exc}") from None
    raise InputError(f"{argument}={shown(items)}: expected an item folder (str or Path), a list of "
                     f"envs.items.Item or an ItemPool, got {type(items).__name__}")
