"""The four CLEVR-POC regions: quadrants of the board in the camera frame.

Two lines through the origin split the ground plane, one along the camera's
right direction and one along its front direction (DEFAULT_DIRECTIONS):

    region 0: back-left    region 1: back-right
    region 2: front-left   region 3: front-right

so regions 1 and 3 form the right half, 0 and 2 the left half, 2 and 3 the
front half, 0 and 1 the back half. An object's region follows from its centre.
Because CLEVR's relations need a 0.2 offset along a direction, an object right
of a right-half object is itself in the right half (and so on), which is what
the ASP region relations right_R / front_R / left_R / behind_R encode.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from clevr_game.camera import DEFAULT_DIRECTIONS

NUM_REGIONS = 4
RIGHT_HALF: frozenset[int] = frozenset({1, 3})
FRONT_HALF: frozenset[int] = frozenset({2, 3})


def _ground_axes(directions: dict | None) -> tuple[np.ndarray, np.ndarray]:
    directions = directions or DEFAULT_DIRECTIONS
    right = np.asarray(directions["right"], dtype=np.float64)[:2]
    front = np.asarray(directions["front"], dtype=np.float64)[:2]
    return right, front


def regions_of(coords: np.ndarray, directions: dict | None = None) -> np.ndarray:
    """(N, 2 or 3) world coordinates -> (N,) int64 region ids 0..3.

    A centre exactly on a dividing line counts as left / back.
    """
    xy = np.atleast_2d(np.asarray(coords, dtype=np.float64))[:, :2]
    right, front = _ground_axes(directions)
    is_right = (xy @ right) > 0.0
    is_front = (xy @ front) > 0.0
    return is_right.astype(np.int64) + 2 * is_front.astype(np.int64)


def distance_to_dividers(coords: np.ndarray, directions: dict | None = None) -> np.ndarray:
    """(N,) distance of each centre to the nearer of the two dividing lines."""
    xy = np.asarray(coords, dtype=np.float64)[:, :2]
    right, front = _ground_axes(directions)
    return np.minimum(np.abs(xy @ right), np.abs(xy @ front))


def region_zones(
    regions: np.ndarray, directions: dict | None = None, margin: float = 0.0
) -> Callable[[np.ndarray], np.ndarray]:
    """A `zones` callable for layout.sample_layout: object i may only take points in regions[i].

    `margin` keeps centres that far from the dividing lines, so a placed object
    stays clearly inside its region.
    """
    wanted = np.asarray(regions, dtype=np.int64)

    def zones(pool: np.ndarray) -> np.ndarray:
        inside = regions_of(pool, directions)[None, :] == wanted[:, None]
        if margin > 0.0:
            inside &= (distance_to_dividers(pool, directions) >= margin)[None, :]
        return inside

    return zones
