"""Game items: (scene, question, program, true answer[, environment]) and their packed arrays.

Items come from a CLEVR dataset folder (`scenes.json` + `questions.json`, written by
`clevr-game generate` or the real CLEVR files) or from a CLEVR-POC dataset folder
(`items.json` + environments). An ItemPool packs the scenes into fixed-size numpy
arrays once, so the batched game never walks Python objects on a step.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from clevr_game.dataset import load_dataset
from clevr_game.errors import InputError
from clevr_game.programs import Program
from clevr_game.scene import MAX_OBJECTS, Scene
from clevr_game.text import MAX_QUESTION_TOKENS, WordVocabulary, default_word_vocabulary
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC
from players.protocol import shown


@dataclass
class Item:
    item_id: str
    scene: Scene
    question: str
    program: Program
    answer: str
    family: int | None = None
    environment: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def clevr_items(scenes_path: str | os.PathLike[str], questions_path: str | os.PathLike[str]) -> list[Item]:
    """Every question with a known answer becomes an item `image_index:question_index`."""
    _, questions, scene_of = load_dataset(scenes_path, questions_path)
    items = []
    for question, scene in zip(questions, scene_of, strict=True):
        if question.answer is None:
            continue
        if len(scene) > MAX_OBJECTS:
            raise InputError(
                f"{Path(scenes_path).name}: scene {question.image_index}: {len(scene)} objects, the game has {MAX_OBJECTS} heads"
            )
        items.append(Item(f"{question.image_index}:{question.index}", scene, question.text,
                          question.program, question.answer, question.family))
    return items


def load_items(path: str | os.PathLike[str]) -> list[Item]:
    """Items of a dataset folder: CLEVR (`scenes.json` + `questions.json`) or CLEVR-POC (`items.json`)."""
    folder = Path(path)
    if (folder / "items.json").is_file():
        from envs.poc_items import poc_items

        return poc_items(folder)
    scenes, questions = folder / "scenes.json", folder / "questions.json"
    if scenes.is_file() and questions.is_file():
        return clevr_items(scenes, questions)
    raise InputError(
        f"{folder}: not an item folder (expected scenes.json + questions.json, or a CLEVR-POC items.json)"
    )


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
