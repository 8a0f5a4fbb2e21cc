"""A dataset as tensors for pixel training: rendered images, tensorised questions, programs, scene targets.

The questions are tensorised by the state players' own code
(`players.state.data.tensorise`: words, answers, families, scene of each
question); images are the dataset's renders with the player's image spec,
indexed like the scenes, so `images[questions.scene_of[q]]` is question q's
image.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from clevr_game.dataset import dataset_files, load_questions
from clevr_game.programs import Program
from clevr_game.scene import load_scenes
from clevr_game.text import WordVocabulary
from players.pixel.images import ImageSpec, dataset_images
from players.pixel.perception import SceneTargets, scene_targets
from players.pixel.program_tokens import encode_programs
from players.state.data import QuestionTensors, tensorise


@dataclass
class PixelData:
    images: torch.Tensor  # (S, H, W, 3) uint8, scenes-file order
    questions: QuestionTensors
    programs: list[Program]  # per question
    answers_text: list[str]  # per question, canonical
    targets: SceneTargets  # per scene: projected centres, attribute ids, presence
    program_ids: torch.Tensor | None = None  # (Q, T) int64 parser targets (neuro-symbolic only)
    detections: dict[str, Any] = field(default_factory=dict)
    """A frozen perception's ObjectTokens of every image, keyed by what they depend on
    (`object_training.detections_key`): computed once for a dataset held in memory, sliced by `select_scenes`."""

    def __len__(self) -> int:
        return len(self.questions)


def load_pixel_data(
    folder: str | os.PathLike[str],
    vocabulary: WordVocabulary,
    answers: Sequence[str],
    spec: ImageSpec,
    *,
    limit: int | None = None,
    extend_vocabulary: bool = False,
    render_workers: int = 2,
    progress: bool = False,
) -> tuple[PixelData, WordVocabulary]:
    """Images (rendered when missing), questions and targets of the dataset in `folder`."""
    questions, vocabulary = tensorise(folder, vocabulary, answers, limit=limit, extend_vocabulary=extend_vocabulary)
    scenes, stack = dataset_images(folder, spec, workers=render_workers, progress=progress)
    _, questions_path = dataset_files(folder)
    records = load_questions(questions_path)[: len(questions)]
    data = PixelData(
        images=torch.from_numpy(stack),
        questions=questions,
        programs=[q.program for q in records],
        answers_text=[str(q.answer).strip().lower() for q in records],
        targets=scene_targets(scenes, spec.width, spec.height),
    )
    return data, vocabulary


def load_question_data(
    folder: str | os.PathLike[str],
    vocabulary: WordVocabulary,
    answers: Sequence[str],
    spec: ImageSpec,
    *,
    extend_vocabulary: bool = False,
) -> tuple[PixelData, WordVocabulary]:
    """Questions, programs and scene targets of the dataset in `folder`, without images (none is rendered).

    For training the parser alone: it reads the words and writes the program, so
    `images` is empty and a step that asks for one fails loudly.
    """
    questions, vocabulary = tensorise(folder, vocabulary, answers, extend_vocabulary=extend_vocabulary)
    scenes_path, questions_path = dataset_files(folder)
    records = load_questions(questions_path)[: len(questions)]
    data = PixelData(
        images=torch.zeros((0, spec.height, spec.width, 3), dtype=torch.uint8),
        questions=questions,
        programs=[q.program for q in records],
        answers_text=[str(q.answer).strip().lower() for q in records],
        targets=scene_targets(load_scenes(scenes_path), spec.width, spec.height),
    )
    return data, vocabulary


def concatenate_pixel_data(parts: Sequence[PixelData]) -> PixelData:
    """One PixelData holding every scene and question of `parts`, each question still about its own image.

    The parts must share one vocabulary and answer list and one image spec (as `load_pixel_data` with
    the same arguments gives them); parser targets are attached afterwards, to the whole.
    """
    from players.state.data import concatenate

    if not parts:
        raise ValueError("no pixel data to join")
    return PixelData(
        images=torch.cat([part.images for part in parts]),
        questions=concatenate([part.questions for part in parts]),
        programs=[program for part in parts for program in part.programs],
        answers_text=[answer for part in parts for answer in part.answers_text],
        targets=SceneTargets(*(torch.cat(field) for field in zip(*(part.targets for part in parts), strict=True))),
    )


def attach_program_ids(data: PixelData, tokens: Sequence[str], length: int) -> None:
    """Parser targets for every question (InputError for a program the token list cannot write)."""
    data.program_ids = torch.from_numpy(encode_programs(data.programs, tokens, length))


def select_scenes(data: PixelData, scene_rows: np.ndarray) -> PixelData:
    """The part of `data` about `scene_rows` (distinct positions in its scenes): their images and targets,
    and every question asked about them, in `data`'s order. The scenes are renumbered 0.. in the order given.

    For training on one split of a dataset held in memory (the examples study): each part
    holds only its own images, so nothing computed per image touches another part's scenes.
    """
    rows = torch.as_tensor(np.asarray(scene_rows), dtype=torch.int64)
    scene_count = int(data.targets.present.shape[0])
    if len(torch.unique(rows)) != len(rows) or (len(rows) and not 0 <= int(rows.min()) <= int(rows.max()) < scene_count):
        raise ValueError(f"scene rows must be distinct positions in 0..{scene_count - 1}")
    new_row = torch.full((scene_count,), -1, dtype=torch.int64)
    new_row[rows] = torch.arange(len(rows))
    q = data.questions
    chosen = torch.nonzero(new_row[q.scene_of] >= 0).flatten()
    questions = QuestionTensors(q.positions[rows], q.attributes[rows], q.present[rows], new_row[q.scene_of[chosen]],
                                q.words[chosen], q.lengths[chosen], q.answers[chosen], q.families[chosen],
                                q.family_names)
    kept = chosen.tolist()
    return PixelData(
        images=data.images[rows] if len(data.images) else data.images,  # a questions-only PixelData has none
        questions=questions,
        programs=[data.programs[i] for i in kept],
        answers_text=[data.answers_text[i] for i in kept],
        targets=SceneTargets(*(t[rows] for t in data.targets)),
        program_ids=None if data.program_ids is None else data.program_ids[chosen],
        detections={key: tokens.select(rows) for key, tokens in data.detections.items()},
    )


def image_rows(data: PixelData, indices: torch.Tensor) -> tuple[torch.Tensor, np.ndarray]:
    """The distinct scenes of questions `indices`, and per question its row among them."""
    scenes = data.questions.scene_of[indices]
    unique, row_of = torch.unique(scenes, return_inverse=True)
    return unique, row_of.numpy()
