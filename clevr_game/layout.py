"""CLEVR's placement rules, for the scene generator and the boundary enforcer.

A layout is valid when every coordinate lies inside (-BOUND, BOUND), every pair
keeps `dist - r_i - r_j >= MIN_GAP` (cubes included, at their full radius), and
every pair is at least MIN_MARGIN apart along the left and the front axes, so no
relation between two objects is ambiguous.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from clevr_game.scene import DEFAULT_DIRECTIONS, Scene

BOUND = 3.0
MIN_GAP = 0.25
MIN_MARGIN = 0.4

GRID_CELLS = 7
"""Cells along each axis of the board's grid: the adversary's absolute moves and the exhaustive datasets place objects on it."""


def grid_centres(cells: int = GRID_CELLS) -> np.ndarray:
    """(cells,) centres of a grid's cells along each axis, the grid covering the board (-BOUND, BOUND)."""
    cell = 2 * BOUND / cells
    return -BOUND + cell * (np.arange(cells) + 0.5)


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


@dataclass(frozen=True)
class BatchVerdict:
    """Per scene of a batch: valid, and for the others the first broken rule (as first_violation)."""

    ok: np.ndarray  # (B,) bool
    kind: np.ndarray  # (B,) 0 valid, 1 bounds, 2 overlap, 3 margin
    first: np.ndarray  # (B,) object index
    second: np.ndarray  # (B,) object index (pairs)
    axis: np.ndarray  # (B,) 0 left-right, 1 front-behind (margins)

    _KINDS = (None, "bounds", "overlap", "margin")
    _AXES = ("left-right", "front-behind")

    def violation(self, row: int) -> LayoutViolation | None:
        kind, first, second, axis = self._rows()[row]
        if kind == 0:
            return None
        if kind == 1:
            return LayoutViolation("bounds", first)
        return LayoutViolation(self._KINDS[kind], first, second, self._AXES[axis] if kind == 3 else None)

    def reason(self, row: int, describe: list[str] | None = None) -> str:
        """violation(row).reason(describe), without building the violation (the game's hot path)."""
        kind, first, second, axis = self._rows()[row]
        if kind == 0:
            return ""
        a = f"object {first} ({describe[first]})" if describe else f"object {first}"
        if kind == 1:
            return f"{a} leaves the board (-{BOUND:g}, {BOUND:g})"
        b = f"object {second} ({describe[second]})" if describe else f"object {second}"
        if kind == 2:
            return f"{a} overlaps {b}"
        return f"{a} and {b} are closer than {MIN_MARGIN:g} along the {self._AXES[axis]} axis"

    def _rows(self) -> list[tuple[int, int, int, int]]:
        # Plain ints once per batch: per-row numpy scalar access costs more than the rest.
        cached = self.__dict__.get("_row_cache")
        if cached is None:
            cached = list(zip(self.kind.tolist(), self.first.tolist(), self.second.tolist(),
                              self.axis.tolist(), strict=True))
            object.__setattr__(self, "_row_cache", cached)
        return cached


@lru_cache(maxsize=16)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    if n < 2:  # keep one (0, 0) pair, masked out by `pair`, so argmax has something to scan
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    return np.triu_indices(n, 1)


def judge_batch(
    xy: np.ndarray,
    radii: np.ndarray,
    present: np.ndarray,
    directions: dict | None = None,
    axes: np.ndarray | None = None,
) -> BatchVerdict:
    """(B, N, 2) positions, (B, N) radii and presence -> every scene's verdict, in one pass.

    The first broken rule is found in the same order as first_violation (bounds by
    object, then overlaps by pair, then margins by pair). `axes` (B, 2, 2) gives each
    scene its own left/front axes (default: from `directions`).
    """
    xy = np.asarray(xy, dtype=np.float64)
    b, n = xy.shape[:2]
    outside = (np.abs(xy) >= BOUND).any(-1) & present
    # The left and front axes are orthonormal, so rotating the points once gives both
    # the distances along each axis and (by Pythagoras) the Euclidean distance.
    if axes is None:
        uv = xy @ margin_axes(directions).T
    else:
        uv = np.matmul(xy, axes.transpose(0, 2, 1))
    # Pairs i < j in row-major order, so argmax finds the same first pair as first_violation.
    first_of, second_of = _pairs(n)
    delta = uv[:, first_of] - uv[:, second_of]  # (B, P, 2)
    gap = np.sqrt((delta**2).sum(-1)) - radii[:, first_of] - radii[:, second_of]
    close = np.abs(delta) < MIN_MARGIN
    pair = present[:, first_of] & present[:, second_of] & (first_of != second_of)
    overlap = pair & (gap < MIN_GAP)
    margin = pair & (close[..., 0] | close[..., 1])
    any_out, any_overlap, any_margin = outside.any(1), overlap.any(1), margin.any(1)
    kind = np.where(any_out, 1, np.where(any_overlap, 2, np.where(any_margin, 3, 0)))
    pair_index = np.where(any_overlap, overlap.argmax(1), margin.argmax(1))
    first = np.where(any_out, outside.argmax(1), first_of[pair_index])
    second = second_of[pair_index]
    axis = np.where(close[np.arange(b), pair_index, 0], 0, 1)
    return BatchVerdict(kind == 0, kind, first, second, axis)


def valid_batch(
    xy: np.ndarray,
    radii: np.ndarray,
    present: np.ndarray,
    directions: dict | None = None,
    axes: np.ndarray | None = None,
) -> np.ndarray:
    """(B,) bool: every rule holds (see judge_batch)."""
    return judge_batch(xy, radii, present, directions, axes).ok


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


def judge_scenes(scenes: Sequence[Scene]) -> list[LayoutViolation | None]:
    """The first broken rule of each scene (as first_violation), each against its own directions.

    Scenes are judged in groups of equal object count, so one crowded scene does not pad the others.
    """
    verdicts: list[LayoutViolation | None] = [None] * len(scenes)
    groups: dict[int, list[int]] = {}
    for position, scene in enumerate(scenes):
        groups.setdefault(len(scene.objects), []).append(position)
    for n, positions in groups.items():
        if n == 0:
            continue
        group = [scenes[p] for p in positions]
        xy = np.array([[o.coords[:2] for o in s.objects] for s in group], dtype=np.float64)
        radii = np.array([[s.vocabulary.radius(o.size) for o in s.objects] for s in group], dtype=np.float64)
        axes = np.array([[s.directions["left"][:2], s.directions["front"][:2]] for s in group], dtype=np.float64)
        verdict = judge_batch(xy, radii, np.ones((len(group), n), dtype=bool), axes=axes)
        for row in np.flatnonzero(~verdict.ok).tolist():
            verdicts[positions[row]] = verdict.violation(row)
    return verdicts
