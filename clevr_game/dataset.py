"""CLEVR question files and datasets (a scenes file with its questions) as typed records."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clevr_game.errors import InputError
from clevr_game.programs import Program, parse_program
from clevr_game.programs.program import validate_values
from clevr_game.scene import Scene, load_scenes, read_json
from clevr_game.vocab import ATTRIBUTES, VOCABULARIES, Vocabulary

ANY_VOCABULARY = Vocabulary(
    "any",
    *(tuple(dict.fromkeys(v for vocabulary in VOCABULARIES.values() for v in vocabulary.values(a)))
      for a in ATTRIBUTES),
    size_radius={},
)
"""Every value of every vocabulary: what a question may name before its scene is known."""


@dataclass
class Question:
    index: int
    image_index: int
    text: str
    program: Program
    answer: str | None
    family: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def parse_question(data: Any, source: str, position: int, vocabulary: Vocabulary = ANY_VOCABULARY) -> Question:
    where = f"{source}: question {position}"
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a question (JSON dict), got {type(data).__name__}")
    image_index = data.get("image_index")
    if isinstance(image_index, bool) or not isinstance(image_index, int):
        raise InputError(f"{where}: missing or non-integer field 'image_index'")
    text = data.get("question", "")
    if not isinstance(text, str):
        raise InputError(f"{where}: question must be a string")
    if "program" not in data:
        raise InputError(f"{where}: missing field 'program'")
    program = parse_program(data["program"], f"{where}, ")
    validate_values(program, vocabulary, f"{where}, ")
    answer = data.get("answer")
    if answer is not None and not isinstance(answer, (str, int, bool)):
        raise InputError(f"{where}: answer must be a string, got {answer!r}")
    if isinstance(answer, bool):
        answer = "yes" if answer else "no"
    family = data.get("question_family_index")
    if family is not None and (isinstance(family, bool) or not isinstance(family, int)):
        raise InputError(f"{where}: question_family_index must be an integer, got {family!r}")
    index = data.get("question_index", position)
    return Question(
        index=index if isinstance(index, int) else position,
        image_index=image_index,
        text=text,
        program=program,
        answer=None if answer is None else str(answer),
        family=family,
        raw=data,
    )


def load_questions(path: str | os.PathLike[str], vocabulary: Vocabulary = ANY_VOCABULARY) -> list[Question]:
    """A CLEVR `{"info", "questions"}` file (or a plain list of questions); values checked against `vocabulary`."""
    data = read_json(path)
    name = Path(path).name
    questions = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(questions, list):
        raise InputError(f"{name}: expected a CLEVR questions file with a 'questions' list")
    return [parse_question(q, name, i, vocabulary) for i, q in enumerate(questions)]


def match_scenes(questions: list[Question], scenes: list[Scene], questions_name: str, scenes_name: str) -> list[Scene]:
    """The scene of every question, looked up by image_index; InputError for a missing one."""
    by_index = {s.image_index if s.image_index is not None else i: s for i, s in enumerate(scenes)}
    out = []
    for q in questions:
        scene = by_index.get(q.image_index)
        if scene is None:
            raise InputError(
                f"{questions_name}: question {q.index}: image_index {q.image_index} is not in {scenes_name}"
            )
        out.append(scene)
    return out


def load_dataset(
    scenes_path: str | os.PathLike[str], questions_path: str | os.PathLike[str]
) -> tuple[list[Scene], list[Question], list[Scene]]:
    """Scenes, questions, and the scene of each question."""
    scenes = load_scenes(scenes_path)
    vocabularies = {scene.vocabulary for scene in scenes}
    common = vocabularies.pop() if len(vocabularies) == 1 else ANY_VOCABULARY
    questions = load_questions(questions_path, common)
    name = Path(questions_path).name
    scene_of = match_scenes(questions, scenes, name, Path(scenes_path).name)
    if common is ANY_VOCABULARY:  # scenes of several vocabularies: each question against its own scene's
        for position, (question, scene) in enumerate(zip(questions, scene_of, strict=True)):
            validate_values(question.program, scene.vocabulary, f"{name}: question {position}, ")
    return scenes, questions, scene_of


def dataset_files(folder: str | os.PathLike[str]) -> tuple[Path, Path]:
    """`scenes.json` and `questions.json` of a dataset folder written by `clevr-game generate`."""
    folder = Path(folder)
    scenes, questions = folder / "scenes.json", folder / "questions.json"
    for path in (scenes, questions):
        if not path.is_file():
            raise InputError(f"{folder}: no {path.name} (expected a folder written by `clevr-game generate`)")
    return scenes, questions
