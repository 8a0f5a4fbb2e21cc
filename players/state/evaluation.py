"""Accuracy of any player on a CLEVR-format dataset, overall and per question family.

Works through the player protocol only (`answer_batch`), so the oracle, a
subprocess or an HTTP player are measured the same way as the state players.
An error answer counts as wrong and is counted apart. Families are the
template file's name, or inferred from the program's shape for CLEVR's own
question files, which name none (`players.families`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from clevr_game.dataset import Question, dataset_files, load_dataset
from clevr_game.errors import InputError
from players.families import question_family
from players.protocol import Answer, Player, Query


@dataclass
class Evaluation:
    correct: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    first_error: str | None = None

    @property
    def accuracy(self) -> float:
        total = sum(self.total.values())
        return sum(self.correct.values()) / total if total else 0.0

    def record(self, question: Question, answer: Answer) -> None:
        """Score one answer against its question's; an error answer is wrong and counted apart."""
        family = question_family(question)
        hit = answer.ok and answer.text == str(question.answer).strip().lower()
        self.correct[family] = self.correct.get(family, 0) + int(hit)
        self.total[family] = self.total.get(family, 0) + 1
        if not answer.ok:
            self.errors += 1
            self.first_error = self.first_error or answer.error

    def family_accuracy(self) -> dict[str, float]:
        return {f: self.correct[f] / self.total[f] for f in sorted(self.total)}

    def lines(self) -> list[str]:
        """Per-family lines, an error line when there were errors, and last `accuracy: X`."""
        out = [
            f"{family}: {self.correct[family] / self.total[family]:.4f} ({self.correct[family]}/{self.total[family]})"
            for family in sorted(self.total)
        ]
        if self.errors:
            out.append(f"error answers: {self.errors} (first: {self.first_error})")
        out.append(f"accuracy: {self.accuracy:.4f}")
        return out


def evaluate_player(
    player: Player,
    folder: str | os.PathLike[str],
    *,
    limit: int | None = None,
    batch_size: int = 512,
    progress: bool = False,
    shown: list[int] | None = None,
) -> Evaluation:
    """Ask `player` every question of the dataset in `folder` (the first `limit` ones) and score it.

    `shown` gives, per question, the position in the scenes file of the scene it is asked about
    (default: its own); the answer it is scored against stays its own scene's.
    """
    from tqdm import tqdm

    scenes_path, questions_path = dataset_files(folder)
    scenes, questions, scene_of = load_dataset(scenes_path, questions_path)
    if limit is not None:
        questions, scene_of = questions[:limit], scene_of[:limit]
    if shown is not None:
        scene_of = [scenes[position] for position in shown[: len(questions)]]
    if not questions:
        raise InputError(f"{questions_path}: no questions to evaluate")
    result = Evaluation()
    bar = tqdm(total=len(questions), disable=not progress, unit="q")
    for start in range(0, len(questions), batch_size):
        chunk = questions[start : start + batch_size]
        queries = [
            Query(f"{q.image_index}:{q.index}", q.text, scene=scene, program=q.program).restricted_to(player.needs)
            for q, scene in zip(chunk, scene_of[start : start + batch_size], strict=True)
        ]
        for question, answer in zip(chunk, player.answer_batch(queries), strict=True):
            if question.answer is None:
                raise InputError(f"{questions_path.name}: question {question.index}: no answer to score against")
            result.record(question, answer)
        bar.update(len(chunk))
    bar.close()
    return result
