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
from clevr_game.layout import judge_scenes
from clevr_game.programs import Program
from clevr_game.programs.signatures import BOOL, INTEGER, SIGNATURES
from clevr_game.scene import MAX_OBJECTS, Scene
from clevr_game.text import MAX_QUESTION_TOKENS, WordVocabulary, default_word_vocabulary
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC
from players.protocol import SET_ANSWER_VOCABULARIES, SET_SEPARATOR, shown


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


def answer_kind_problem(program: Program, answer: str, scene: Scene) -> str | None:
    """Why `answer` cannot answer `program` on `scene` whatever the scene holds, or None.

    Only the answer's kind is judged (a count is a whole number no larger than the
    scene's objects, a yes/no question is answered yes or no, a `query_<attribute>`
    a value of that attribute; a CLEVR-POC set answer holds such values): a stored
    answer that fails this was never computed from the question.
    """
    function = program[-1].function if program else ""
    output = SIGNATURES.get(function, ((), ""))[1]
    if output == INTEGER:
        if not (answer.isascii() and answer.isdigit()) or int(answer) > len(scene):
            return f"{function} answers a whole number from 0 to {len(scene)} (the scene's objects)"
    elif output == BOOL:
        if answer not in ("yes", "no"):
            return f"{function} answers 'yes' or 'no'"
    elif function.startswith("query_") and function[len("query_"):] in ATTRIBUTES:
        attribute = function[len("query_"):]
        allowed = scene.vocabulary.values(attribute)
        values = answer.split(SET_SEPARATOR) if scene.vocabulary.name in SET_ANSWER_VOCABULARIES else [answer]
        if any(value not in allowed for value in values):
            return f"{function} answers one of {', '.join(allowed)}"
    return None


def check_item_scenes(scenes: Sequence[Scene], labels: Sequence[str]) -> None:
    """InputError naming the first scene that breaks CLEVR's placement rules (clevr_game.layout).

    `labels` locate each scene in its file (`scenes.json: scene 3`). Visibility, the one rule
    that needs a render, is the game's to judge.
    """
    for label, verdict in zip(labels, judge_scenes(scenes), strict=True):
        if verdict is not None:
            raise InputError(f"{label}: {verdict.reason()} (CLEVR's placement rules; a game item must keep them)")


def clevr_items(scenes_path: str | os.PathLike[str], questions_path: str | os.PathLike[str]) -> list[Item]:
    """Every question with a known answer becomes an item `image_index:question_index`.

    The scenes items use must keep CLEVR's placement rules and each stored answer must
    be of its question's kind: InputError naming file, scene or question, and field.
    """
    scenes, questions, scene_of = load_dataset(scenes_path, questions_path)
    scenes_name, questions_name = Path(scenes_path).name, Path(questions_path).name
    items = []
    used: dict[int, Scene] = {}
    for position, (question, scene) in enumerate(zip(questions, scene_of, strict=True)):
        if question.answer is None:
            continue
        if len(scene) > MAX_OBJECTS:
            raise InputError(
                f"{scenes_name}: scene {question.image_index}: {len(scene)} objects, the game has {MAX_OBJECTS} heads"
            )
        problem = answer_kind_problem(question.program, question.answer, scene)
        if problem is not None:
            raise InputError(f"{questions_name}: question {position}: field 'answer' is {shown(question.answer)}, "
                             f"but {problem}")
        used[id(scene)] = scene
        items.append(Item(f"{question.image_index}:{question.index}", scene, question.text,
                          question.program, question.answer, question.family))
    positions = {id(scene): position for position, scene in enumerate(scenes)}
    checked = sorted(used.values(), key=lambda scene: positions[id(scene)])
    check_item_scenes(checked, [f"{scenes_name}: scene {positions[id(scene)]}" for scene in checked])
    return items


def load_items(path: str | os.PathLike[str]) -> list[Item]:
    """Items of a dataset folder: CLEVR (`scenes.json` + `questions.json`) or CLEVR-POC (`items.json`).

    InputError (one line, naming file, item and field) for a scene that breaks CLEVR's placement
    rules or a stored answer of the wrong kind: the game could not play such an item fairly.
    """
    folder = Path(path)
    if (folder / "items.json").is_file():
        from envs.poc_items import check_game_items, poc_items

        items = poc_items(folder)
        check_game_items(items)
        return items
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
