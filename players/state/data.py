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

from clevr_game.dataset import Question, dataset_files, load_dataset
from clevr_game.errors import InputError
from clevr_game.text import WordVocabulary, tokenize
from players.state.features import (
    MAX_QUESTION_TOKENS,
    answer_index,
    family_name,
    question_ids,
    scene_arrays,
)
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


def extended_vocabulary(base: WordVocabulary, questions: Sequence[Question]) -> WordVocabulary:
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
    scenes, questions, _ = load_dataset(scenes_path, questions_path)
    if limit is not None:
        questions = questions[:limit]
    if not questions:
        raise InputError(f"{questions_path}: no questions")
    if extend_vocabulary:
        vocabulary = extended_vocabulary(vocabulary, questions)
    if len(vocabulary) > np.iinfo(np.int16).max:
        raise InputError(f"word vocabulary of {len(vocabulary)} words is too large")
    row_of_image = {(s.image_index if s.image_index is not None else i): i for i, s in enumerate(scenes)}
    arrays = scene_arrays(scenes, f"{Path(scenes_path).name}: scene")
    classes = {answer: index for index, answer in enumerate(answers)}
    answer_ids = np.empty(len(questions), dtype=np.int64)
    for row, question in enumerate(questions):
        where = f"{Path(questions_path).name}: question {question.index}"
        if question.answer is None:
            raise InputError(f"{where}: no answer (training and evaluation need answered questions)")
        answer_index(question.answer, where)  # the CLEVR check, with its one-line error
        answer_class = classes.get(question.answer.strip().lower())
        if answer_class is None:
            raise InputError(f"{where}: answer {question.answer!r} is not among the player's answers")
        answer_ids[row] = answer_class
    families = [family_name(q) for q in questions]
    family_names = sorted(set(families))
    family_ids = {name: i for i, name in enumerate(family_names)}
    words = question_ids([q.text for q in questions], vocabulary, MAX_QUESTION_TOKENS)
    tensors = QuestionTensors(
        positions=torch.from_numpy(arrays.positions),
        attributes=torch.from_numpy(arrays.attributes),
        present=torch.from_numpy(arrays.present),
        scene_of=torch.tensor([row_of_image[q.image_index] for q in questions], dtype=torch.int64),
        words=torch.from_numpy(words.astype(np.int16)),
        lengths=torch.from_numpy((words != 0).sum(axis=1)),
        answers=torch.from_numpy(answer_ids),
        families=torch.tensor([family_ids[f] for f in families], dtype=torch.int64),
        family_names=family_names,
    )
    return tensors, vocabulary
