"""Accuracy of an image-reading player on a CLEVR-format dataset, images rendered with its spec.

The same scoring as `players.state.evaluation` (overall, per family, error
answers counted apart); the queries carry `image_path` (the dataset's images
rendered with the player's preset and size) and the scene's answer vocabulary,
and nothing else a pixel player may not see.

Any scenes file will do, generated or CLEVR's own (e.g. the real val scenes
beside their questions): the images the evaluated questions ask about are
rendered first when missing, and only those, so `--limit 100` on 15,000 scenes
renders the few dozen it needs.
"""

from __future__ import annotations

import os

from clevr_game.dataset import dataset_files, load_questions
from clevr_game.errors import InputError
from clevr_game.scene import load_scenes
from players.pixel.images import ImageSpec, ensure_images
from players.protocol import NEED_IMAGE, Player, Query
from players.state.evaluation import Evaluation, evaluate_player


def evaluate_image_player(
    player: Player,
    folder: str | os.PathLike[str],
    *,
    spec: ImageSpec | None = None,
    limit: int | None = None,
    batch_size: int = 256,
    render_workers: int = 2,
    progress: bool = False,
    shown: list[int] | None = None,
) -> Evaluation:
    """Ask `player` every question (the first `limit`) of the dataset in `folder` about its rendered image.

    `spec` defaults to the player's own `image_spec` (pixel players have one),
    else the fast preset at 128 x 96. `shown` gives, per question, the position in the scenes file
    of the scene whose image it is asked about (default: its own); it is scored against its own answer.
    """
    from tqdm import tqdm

    spec = spec or getattr(player, "image_spec", None) or ImageSpec()
    scenes_path, questions_path = dataset_files(folder)
    questions = load_questions(questions_path)[:limit]
    if not questions:
        raise InputError(f"{questions_path}: no questions to evaluate")
    position_of = {(s.image_index if s.image_index is not None else i): i
                   for i, s in enumerate(load_scenes(scenes_path))}
    for q in questions:  # bad input stops before any rendering
        if q.image_index not in position_of:
            raise InputError(f"{questions_path.name}: question {q.index}: image_index {q.image_index} has no scene")
        if q.answer is None:
            raise InputError(f"{questions_path.name}: question {q.index}: no answer to score against")
    positions = shown[: len(questions)] if shown is not None else [position_of[q.image_index] for q in questions]
    scenes, paths = ensure_images(folder, spec, workers=render_workers, progress=progress, only=set(positions))
    result = Evaluation()
    bar = tqdm(total=len(questions), disable=not progress, unit="q")
    for start in range(0, len(questions), batch_size):
        chunk = questions[start : start + batch_size]
        queries = []
        for q, position in zip(chunk, positions[start : start + batch_size], strict=True):
            scene, path = scenes[position], paths[position]
            queries.append(Query(f"{q.image_index}:{q.index}", q.text, image_path=str(path),
                                 vocabulary=scene.vocabulary).restricted_to(player.needs))
        for question, answer in zip(chunk, player.answer_batch(queries), strict=True):
            result.record(question, answer)
        bar.update(len(chunk))
    bar.close()
    return result


def evaluate_on_dataset(
    player: Player,
    folder: str | os.PathLike[str],
    *,
    limit: int | None = None,
    batch_size: int | None = None,
    render_workers: int = 1,
    progress: bool = False,
    shown: list[int] | None = None,
) -> Evaluation:
    """Any player on the dataset in `folder`, as `players eval` asks it: about the rendered images for a
    player that needs them (`evaluate_image_player`), about the scenes otherwise (`evaluate_player`)."""
    sizing = {} if batch_size is None else {"batch_size": batch_size}
    if NEED_IMAGE in player.needs:
        return evaluate_image_player(player, folder, limit=limit, render_workers=render_workers, progress=progress,
                                     shown=shown, **sizing)
    return evaluate_player(player, folder, limit=limit, progress=progress, shown=shown, **sizing)
