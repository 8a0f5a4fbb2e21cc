"""Game items: (scene, question, program, true answer[, environment]), read from a CLEVR dataset.

An item is what one game is played on. CLEVR items come from `scenes.json` +
`questions.json` (written by `clevr-game generate`, or the real CLEVR files);
CLEVR-POC items are read in `clevr_game.asp.items`, and `clevr_game.item_folders`
tells the two kinds of folder apart. Every item a game gets keeps CLEVR's placement
rules and has a stored answer of its question's kind.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clevr_game.dataset import load_dataset
from clevr_game.errors import InputError, shown
from clevr_game.layout import judge_scenes
from clevr_game.programs import Program
from clevr_game.programs.signatures import BOOL, INTEGER, SIGNATURES
from clevr_game.scene import MAX_OBJECTS, Scene
from clevr_game.vocab import ATTRIBUTES, SET_ANSWER_VOCABULARIES, SET_SEPARATOR


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
