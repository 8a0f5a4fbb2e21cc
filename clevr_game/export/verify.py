"""Re-checking a recorded manipulation before it becomes training data.

The moved scene is rebuilt from the original (attributes, rotations and extras kept)
at the recorded coordinates, with relationships and pixel coordinates computed
afresh; the layout must be valid and the program must still give the true answer.
A failure is a one-line InputError naming the item: it would mean a bug upstream
(or a run read against the wrong items folder).
"""

from __future__ import annotations

import numpy as np

from clevr_game.enforcers import BoundaryEnforcer
from clevr_game.errors import InputError
from clevr_game.export.items import SourceItem
from clevr_game.export.records import Manipulation
from clevr_game.programs import execute_scene
from clevr_game.scene import IMAGE_HEIGHT, IMAGE_WIDTH, Scene, parse_scene, project_to_pixels

MOVE_TOLERANCE = 1e-6
"""How far a recorded coordinate may sit from original + move (JSON float round trips)."""


def _where(record: Manipulation) -> str:
    return f"{record.where}: item {record.item_id}"


def _check_same_objects(moved: Scene, original: Scene, where: str) -> None:
    if [o.describe() for o in moved.objects] != [o.describe() for o in original.objects]:
        raise InputError(f"{where}: the manipulated scene's objects differ from the original scene's")


def _check_moves(record: Manipulation, moved: Scene, original: Scene, where: str) -> None:
    expected = original.coords()[:, :2].copy()
    for obj, dx, dy in record.moves:
        if not 0 <= obj < len(expected):
            raise InputError(f"{where}: move of object {obj}, the scene has {len(expected)} objects")
        expected[obj] += (dx, dy)
    if not np.allclose(moved.coords()[:, :2], expected, atol=MOVE_TOLERANCE, rtol=0.0):
        raise InputError(f"{where}: the recorded moves do not lead from the original scene to the recorded one")


def verified_scene(
    record: Manipulation, source: SourceItem, width: int = IMAGE_WIDTH, height: int = IMAGE_HEIGHT
) -> Scene:
    """The manipulated scene, rebuilt and re-checked; pixel coordinates for a `width` x `height` image."""
    where = _where(record)
    original = source.scene
    if record.true_answer != source.question.answer:
        raise InputError(
            f"{where}: the run's true answer {record.true_answer!r} differs from the dataset's "
            f"{source.question.answer!r}"
        )
    recorded = parse_scene(record.scene, where, vocabulary=original.vocabulary)
    _check_same_objects(recorded, original, where)
    _check_moves(record, recorded, original, where)
    coords = recorded.coords()
    scene = original.with_coords(coords, pixel_coords=project_to_pixels(coords, width, height))
    verdict = BoundaryEnforcer().judge(scene)
    if not verdict.ok:
        raise InputError(f"{where}: the manipulated scene is not valid: {verdict.reason}")
    answer = execute_scene(source.question.program, scene)
    if answer != source.question.answer:
        raise InputError(
            f"{where}: re-executing the program on the manipulated scene gives {answer!r}, "
            f"not the true answer {source.question.answer!r} (the game accepted a move it should not have)"
        )
    return scene
