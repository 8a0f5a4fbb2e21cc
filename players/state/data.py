"""A CLEVR-format dataset as tensors, built once so training never touches JSON again.

Scenes are stored once and questions point at them; word ids are kept as int16
(a vocabulary has a few hundred words) to hold a million questions in memory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from clevr_game.dataset import dataset_files
from clevr_game.errors import InputError
from clevr_game.scene import load_scenes, read_json
from clevr_game.text import WordVocabulary, tokenize
from players.state.features import MAX_QUESTION_TOKENS, answer_index, question_ids, scene_arrays
from players.state.models import StateBatch


@dataclass
class QuestionTensors:
    """Every question of a dataset with its scene, as tensors indexed by question."""

    positions: torch.Tensor  # (S, 10, 2) float32, per scene
    attributes: torch.Tensor  # (S, 10, 4) int64, per scene
    present: torch.Tensor  # (S, 10) bool, per scene
    scene_of: torch.Tensor  # (Q,) int64
    words: torch.Tensor  # (Q, L) int16
    lengths: torch.Tensor  # (Q,) int64, tokens before padding
    answers: torch.Tensor  # (Q,) int64
    families: torch.Tensor  # (Q,) int64 into family_names
    family_names: list[str]

    def __len__(self) -> int:
        return int(self.answers.shape[0])

    def batch(self, indices: torch.Tensor) -> tuple[StateBatch, torch.Tensor]:
        """The StateBatch and answer classes of `indices`, words trimmed to the longest question."""
        scenes = self.scene_of[indices]
        longest = max(int(self.lengths[indices].max()), 1)
        words = self.words[indices, :longest].long()
        batch = StateBatch(self.positions[scenes], self.attributes[scenes], self.present[scenes], words)
        return batch, self.answers[indices]


@dataclass(frozen=True)
class QuestionRecord:
    """What training reads of a question: no program, so a million of them load quickly."""

    index: int
    image_index: int
    text: str
    answer: str
    family: str


def read_question_records(path: Path) -> list[QuestionRecord]:
    """The questions of a CLEVR questions file with an answer each; InputError naming the bad one."""
    data = read_json(path)
    questions = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(questions, list):
        raise InputError(f"{path.name}: expected a CLEVR questions file with a 'questions' list")
    records = []
    for position, raw in enumerate(questions):
        where = f"{path.name}: question {position}"
        if not isinstance(raw, dict):
            raise InputError(f"{where}: expected a question (JSON dict)")
        image_index, text, answer = raw.get("image_index"), raw.get("question"), raw.get("answer")
        if isinstance(image_index, bool) or not isinstance(image_index, int):
            raise InputError(f"{where}: missing or non-integer field 'image_index'")
        if not isinstance(text, str):
            raise InputError(f"{where}: missing or non-string field 'question'")
        if isinstance(answer, bool):
            answer = "yes" if answer else "no"
        if not isinstance(answer, (str, int)):
            raise InputError(f"{where}: no answer (training and evaluation need answered questions)")
        template = raw.get("template_filename")
        if isinstance(template, str) and template:
            family = Path(template).stem
        else:
            family = str(raw.get("question_family_index", "unknown"))
        records.append(QuestionRecord(position, image_index, text, str(answer), family))
    return records


def extended_vocabulary(base: WordVocabulary, questions: Sequence[QuestionRecord]) -> WordVocabulary:
    """`base` plus every new word of `questions`, appended in sorted order (stable ids)."""
    words = {w for q in questions for w in tokenize(q.text)}
    return WordVocabulary(list(base.words[2:]) + sorted(words - set(base.words)))


def tensorise(
    folder: str | os.PathLike[str],
    vocabulary: WordVocabulary,
    answers: Sequence[str],
    limit: int | None = None,
    extend_vocabulary: bool = False,
) -> tuple[QuestionTensors, WordVocabulary]:
    """Load `folder` (scenes.json + questions.json) as QuestionTensors; InputError on bad data.

    `limit` keeps the first questions only (for quick evaluation). With
    `extend_vocabulary` (training) the dataset's new words join the vocabulary;
    otherwise they encode as the UNKNOWN id. Returns the vocabulary used.
    """
    scenes_path, questions_path = dataset_files(folder)
    questions = read_question_records(questions_path)
    if limit is not None:
        questions = questions[:limit]
    if not questions:
        raise InputError(f"{questions_path}: no questions")
    scenes = load_scenes(scenes_path)
    if extend_vocabulary:
        vocabulary = extended_vocabulary(vocabulary, questions)
    if len(vocabulary) > np.iinfo(np.int16).max:
        raise InputError(f"word vocabulary of {len(vocabulary)} words is too large")
    row_of_image = {(s.image_index if s.image_index is not None else i): i for i, s in enumerate(scenes)}
    arrays = scene_arrays(scenes, f"{scenes_path.name}: scene")
    classes = {answer: index for index, answer in enumerate(answers)}
    answer_ids = np.empty(len(questions), dtype=np.int64)
    scene_rows = np.empty(len(questions), dtype=np.int64)
    for row, question in enumerate(questions):
        where = f"{questions_path.name}: question {question.index}"
        answer_index(question.answer, where)  # the CLEVR check, with its one-line error
        answer_class = classes.get(question.answer.strip().lower())
        if answer_class is None:
            raise InputError(f"{where}: answer {question.answer!r} is not among the player's answers")
        answer_ids[row] = answer_class
        scene_row = row_of_image.get(question.image_index)
        if scene_row is None:
            raise InputError(f"{where}: image_index {question.image_index} is not in {scenes_path.name}")
        scene_rows[row] = scene_row
    family_names = sorted({q.family for q in questions})
    family_ids = {name: i for i, name in enumerate(family_names)}
    words = question_ids([q.text for q in questions], vocabulary, MAX_QUESTION_TOKENS)
    tensors = QuestionTensors(
        positions=torch.from_numpy(arrays.positions),
        attributes=torch.from_numpy(arrays.attributes),
        present=torch.from_numpy(arrays.present),
        scene_of=torch.from_numpy(scene_rows),
        words=torch.from_numpy(words.astype(np.int16)),
        lengths=torch.from_numpy((words != 0).sum(axis=1)),
        answers=torch.from_numpy(answer_ids),
        families=torch.tensor([family_ids[q.family] for q in questions], dtype=torch.int64),
        family_names=family_names,
    )
    return tensors, vocabulary


def concatenate(parts: Sequence[QuestionTensors]) -> QuestionTensors:
    """One QuestionTensors holding every question of `parts`, each still pointing at its own scene.

    The parts must share one vocabulary (word ids are copied as they are).
    """
    if not parts:
        raise InputError("no datasets to join")
    family_names = sorted({name for part in parts for name in part.family_names})
    family_ids = {name: i for i, name in enumerate(family_names)}
    scene_offsets = np.cumsum([0] + [int(part.positions.shape[0]) for part in parts[:-1]])
    return QuestionTensors(
        positions=torch.cat([part.positions for part in parts]),
        attributes=torch.cat([part.attributes for part in parts]),
        present=torch.cat([part.present for part in parts]),
        scene_of=torch.cat([part.scene_of + int(offset) for part, offset in zip(parts, scene_offsets, strict=True)]),
        words=torch.cat([part.words for part in parts]),
        lengths=torch.cat([part.lengths for part in parts]),
        answers=torch.cat([part.answers for part in parts]),
        # Family ids are positions in each part's own sorted list: map them into the joint one.
        families=torch.cat([
            torch.tensor([family_ids[name] for name in part.family_names], dtype=torch.int64)[part.families]
            for part in parts
        ]),
        family_names=family_names,
    )
