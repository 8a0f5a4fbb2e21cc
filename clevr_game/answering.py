"""Execute every question of a CLEVR questions file on its scene: `clevr-game answer`."""

from __future__ import annotations

import os

from clevr_game.dataset import load_dataset
from clevr_game.programs import execute_scene
from clevr_game.scene import write_json_atomic


def answer_files(
    scenes_path: str | os.PathLike[str],
    questions_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None = None,
) -> tuple[int, int]:
    """(correct, answered-with-ground-truth); optionally write the predictions as JSON."""
    _, questions, scene_of = load_dataset(scenes_path, questions_path)
    correct = total = 0
    predictions = []
    for question, scene in zip(questions, scene_of, strict=True):
        predicted = execute_scene(question.program, scene)
        predictions.append({"question_index": question.index, "image_index": question.image_index,
                            "answer": predicted})
        if question.answer is not None:
            total += 1
            correct += predicted == question.answer
    if out_path is not None:
        write_json_atomic(out_path, {"predictions": predictions})
    return correct, total
