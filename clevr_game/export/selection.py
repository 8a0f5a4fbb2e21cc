"""Which manipulations go into the dataset, and when two of them are the same sample."""

from __future__ import annotations

from collections.abc import Callable

from clevr_game.export.records import Manipulation
from clevr_game.scene import Scene

SELECTIONS: dict[str, Callable[[Manipulation], bool]] = {
    "all": lambda record: True,  # every valid move, answer changed or not
    "flips": lambda record: record.changed,
    "drops": lambda record: record.dropped,
}
"""--select: every valid move, the moves that changed the answer, those that made a right answer wrong."""

DESCRIPTIONS = {
    "all": "valid move",
    "flips": "valid move that changed the player's answer",
    "drops": "valid move that made a right answer wrong",
}

COORDINATE_DECIMALS = 3
"""Scenes whose coordinates agree to a millimetre (a CLEVR unit is about a metre) are one scene."""

SceneKey = tuple
"""(original image_index, rounded coordinates of every object)."""


def selected(record: Manipulation, select: str) -> bool:
    # A move that left every object in place is the original scene, not a manipulation.
    return bool(record.moves) and SELECTIONS[select](record)


def scene_key(image_index: int, scene: Scene) -> SceneKey:
    rounded = tuple(round(float(c), COORDINATE_DECIMALS) + 0.0 for c in scene.coords().ravel())
    return (image_index, rounded)  # + 0.0 turns -0.0 into 0.0, so both round to one key
