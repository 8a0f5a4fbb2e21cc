"""The adversary's action space, defined once: bins per axis, the stay bin, the grid, head order.

An action is 20 bins, an x bin and a y bin for each of the ten heads; a head
stands for one object slot of the scene through the episode's head assignment.
In displacement mode bin b moves the object by (b - STAY_BIN) * step; in
absolute mode it places the object at the centre of grid cell b of a 7 x 7 grid
over the board.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from clevr_game.layout import grid_centres
from envs.items import MAX_OBJECTS

NUM_BINS = 7
STAY_BIN = 3
DEFAULT_STEP = 0.3
"""World units per displacement bin."""
ACTION_DIMS = 2 * MAX_OBJECTS
MOVE_MODES = ("displacement", "absolute")


def action_space() -> spaces.MultiDiscrete:
    """One move: an x and a y bin for each head."""
    return spaces.MultiDiscrete([NUM_BINS] * ACTION_DIMS)


def stay_actions(count: int) -> np.ndarray:
    """(count, 20) actions that move nothing (displacement mode)."""
    return np.full((count, ACTION_DIMS), STAY_BIN, dtype=np.int64)


def random_heads(rng: np.random.Generator, count: int) -> np.ndarray:
    """(count, 10) head -> object slot assignments, each a uniform permutation.

    Heads are shuffled per episode so that no head learns one slot of the scene
    file; one call draws every row, in the order the pool's episodes were drawn.
    """
    return rng.permuted(np.tile(np.arange(MAX_OBJECTS), (count, 1)), axis=1)


@dataclass(frozen=True)
class MoveSpace:
    """How a bin index becomes a position: displacement (bin 3 = stay) or an absolute 7 x 7 grid."""

    mode: str = "displacement"
    step: float = DEFAULT_STEP

    def __post_init__(self) -> None:
        if self.mode not in MOVE_MODES:
            raise ValueError(f"unknown move mode {self.mode!r} (expected displacement or absolute)")

    @property
    def values(self) -> np.ndarray:
        if self.mode == "displacement":
            return (np.arange(NUM_BINS) - STAY_BIN) * self.step
        return grid_centres(NUM_BINS)

    def apply(self, xy: np.ndarray, heads: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """(B, 10, 2) positions, (B, 10) head -> object slot, (B, 20) bins -> moved positions."""
        bins = actions.reshape(actions.shape[0], MAX_OBJECTS, 2)
        per_head = self.values[bins]
        moved = xy.copy()
        rows = np.arange(xy.shape[0])[:, None]
        if self.mode == "displacement":
            moved[rows, heads] += per_head
        else:
            moved[rows, heads] = per_head
        return moved

    def exact_shifts(self, shifts: np.ndarray) -> np.ndarray:
        """Displacements as the grid gives them (0.6, not the sum's 0.6000000000000001), for display and export."""
        if self.mode == "displacement":
            shifts = np.round(shifts / self.step) * self.step
        return np.round(shifts, 10)
