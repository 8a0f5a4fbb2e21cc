"""CLEVR's placement rules, for the scene generator and the boundary enforcer.

A layout is valid when every coordinate lies inside (-BOUND, BOUND), every pair
keeps `dist - r_i - r_j >= MIN_GAP` (cubes included, at their full radius), and
every pair is at least MIN_MARGIN apart along the left and the front axes, so no
relation between two objects is ambiguous.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from clevr_game.scene import DEFAULT_DIRECTIONS

BOUND = 3.0
MIN_GAP = 0.25
MIN_MARGIN = 0.4


@dataclass(frozen=True)
class LayoutViolation:
    kind: str  # "bounds" | "overlap" | "margin"
    first: int
    second: int | None = None
    axis: str | None = None

    def reason(self, describe: list[str] | None = None) -> str:
        def name(i: int) -> str:
            return f"object {i} ({describe[i]})" if describe else f"object {i}"

        if self.kind == "bounds":
            return f"{name(self.first)} leaves the board (-{BOUND:g}, {BOUND:g})"
        if self.kind == "overlap":
            return f"{name(self.first)} overlaps {name(self.second)}"
        return f"{name(self.first)} and {name(self.second)} are closer than {MIN_MARGIN:g} along the {self.axis} axis"


def margin_axes(directions: dict | None = None) -> np.ndarray:
    """(2, 2) ground-plane unit vectors of the left and front axes."""
    directions = directions or DEFAULT_DIRECTIONS
    return np.array([directions["left"][:2], directions["front"][:2]], dtype=np.float64)


def first_violation(
    xy: np.ndarray, radii: np.ndarray, directions: dict | None = None
) -> LayoutViolation | None:
    """The first broken rule of a layout (objects in index order), or None when valid."""
    xy = np.asarray(xy, dtype=np.float64)[:, :2]
    outside = np.flatnonzero(np.any(np.abs(xy) >= BOUND, axis=1))
    if outside.size:
        return LayoutViolation("bounds", int(outside[0]))
    n = xy.shape[0]
    if n < 2:
        return None
    delta = xy[:, None, :] - xy[None, :, :]
    gap = np.sqrt((delta**2).sum(-1)) - radii[:, None] - radii[None, :]
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    bad = np.argwhere((gap < MIN_GAP) & upper)
    if bad.size:
        return LayoutViolation("overlap", int(bad[0, 0]), int(bad[0, 1]))
    along = np.abs(delta @ margin_axes(directions).T)  # (n, n, 2)
    bad = np.argwhere((along < MIN_MARGIN).any(-1) & upper)
    if bad.size:
        i, j = int(bad[0, 0]), int(bad[0, 1])
        axis = "left-right" if along[i, j, 0] < MIN_MARGIN else "front-behind"
        return LayoutViolation("margin", i, j, axis)
    return None


def valid_batch(
    xy: np.ndarray,
    radii: np.ndarray,
    present: np.ndarray,
    directions: dict | None = None,
    axes: np.ndarray | None = None,
) -> np.ndarray:
    """(B, N, 2) positions, (B, N) radii and presence -> (B,) bool: every rule holds.

    `axes` (B, 2, 2) gives each scene its own left/front axes (default: from `directions`).
    """
    xy = np.asarray(xy, dtype=np.float64)
    inside = ~np.any((np.abs(xy) >= BOUND).any(-1) & present, axis=1)
    delta = xy[:, :, None, :] - xy[:, None, :, :]
    gap = np.sqrt((delta**2).sum(-1)) - radii[:, :, None] - radii[:, None, :]
    if axes is None:
        along = np.abs(delta @ margin_axes(directions).T)
    else:
        along = np.abs(np.einsum("bijk,bak->bija", delta, axes))
    n = xy.shape[1]
    pair = present[:, :, None] & present[:, None, :] & ~np.eye(n, dtype=bool)
    broken = pair & ((gap < MIN_GAP) | (along < MIN_MARGIN).any(-1))
    return inside & ~broken.any(axis=(1, 2))


def sample_layout(
    radii: np.ndarray,
    rng: np.random.Generator,
    directions: dict | None = None,
    zones: Callable[[np.ndarray], np.ndarray] | None = None,
    pool_size: int = 512,
    max_restarts: int = 100,
) -> np.ndarray | None:
    """Place objects one by one, each uniformly among the positions the rules still allow.

    A pool of uniform random points is drawn once per attempt and, for each distinct
    radius, a mask of pool points still compatible with every placed object is kept up
    to date; the first allowed point of the (random) pool is a uniform draw from the
    allowed region, as CLEVR's rejection sampling is, at a fraction of its cost.
    `zones` maps the (M, 2) pool to an (N, M) mask of the points each object may take
    (CLEVR-POC confines objects to regions).
    Returns (N, 2), or None when every attempt ran out of room.
    """
    radii = np.asarray(radii, dtype=np.float64)
    n = radii.shape[0]
    axes = margin_axes(directions)
    classes, class_of = np.unique(radii, return_inverse=True)
    limit = BOUND - 1e-6
    for _ in range(max_restarts):
        pool = rng.uniform(-limit, limit, (pool_size, 2))
        along = pool @ axes.T
        allowed_by_class = np.ones((classes.size, pool_size), dtype=bool)
        in_zone = zones(pool) if zones is not None else None
        placed = np.empty((n, 2))
        for i in range(n):
            allowed = allowed_by_class[class_of[i]]
            if in_zone is not None:
                allowed = allowed & in_zone[i]
            k = int(allowed.argmax())
            if not allowed[k]:
                break
            placed[i] = pool[k]
            dist = np.hypot(pool[:, 0] - pool[k, 0], pool[:, 1] - pool[k, 1])
            apart = (np.abs(along - along[k]) >= MIN_MARGIN).all(1)
            allowed_by_class &= apart & (dist[None, :] - classes[:, None] - radii[i] >= MIN_GAP)
        else:
            return placed
    return None
