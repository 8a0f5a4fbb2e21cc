"""Visible pixels per object without Blender: a ray per pixel against each object's exact shape.

The index pass (`Renderer.visible_pixels`) has a Blender worker rasterise every object
in a flat id colour. The same picture follows from geometry alone: a ray from CLEVR's
camera through each pixel centre, intersected with every object's shape, and the
nearest hit owns the pixel. The shapes are those the renderer builds
(render/blender/geometry.py): a unit shape scaled by the size's radius and turned
about z by the scene's `rotation` read as radians, as CLEVR's scripts and the renderer do.

- sphere of radius 1;
- cube [-1, 1]^3 whose edges and corners are rounded with radius 0.15 (its bevel);
- cylinder of radius 1 from z = -1 to 1 whose rims are rounded with radius 0.05;
- cone (CLEVR-POC) of base radius 1 at z = -1, apex at z = 1.

The ground and the lights play no part: only the image border and objects in front
of each other decide what shows. Each object is tested only on the pixels of its
projected bounds, all objects of a shape at once, and the nearest hit keeps the pixel:
a scene costs a few milliseconds in numpy. Against the index pass it differs by the meshes' facets, a
few pixels along an outline (benchmarks/perf_render.py `visibility_agreement`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from clevr_game.errors import InputError
from clevr_game.render.frame import FrameObject, frame_of
from clevr_game.scene import CAMERA_LENS_MM, CAMERA_MATRIX_WORLD, CAMERA_SENSOR_WIDTH_MM, Scene

INDEX_SIZE = (320, 240)
"""CLEVR's size for counting visible pixels (its 200-pixel rule is stated at 320 x 240)."""
CUBE_ROUNDING = 0.15
"""Radius of the cube's rounded edges and corners, as a fraction of its half-width (the renderer's bevel)."""
CYLINDER_ROUNDING = 0.05
"""Radius of the cylinder's rounded rims, as a fraction of its radius (the renderer's bevel)."""

_BACKGROUND = -1
_CAMERA_ROTATION = CAMERA_MATRIX_WORLD[:3, :3]
_CAMERA_ORIGIN = CAMERA_MATRIX_WORLD[:3, 3]
_RIM_ROUNDS = 3
_RIM_POINTS = 48  # points on a circle whose projections bound its ellipse, up to a hundredth of the radius

Vectors = tuple[np.ndarray, np.ndarray, np.ndarray]
"""k vectors as three (k,) arrays of x, y and z components."""


@functools.lru_cache(maxsize=4)
def pixel_rays(width: int, height: int) -> Vectors:
    """Unit world directions through the pixel centres of a `width` x `height` image: (height, width) arrays
    of x, y and z components, rows from the top."""
    focal = _focal_pixels(width)
    x = (np.arange(width) + 0.5 - width / 2) / focal
    y = (height / 2 - np.arange(height) - 0.5) / focal
    camera = np.stack(np.broadcast_arrays(x[None, :], y[:, None], -1.0), axis=-1)
    world = camera @ _CAMERA_ROTATION.T
    world /= np.linalg.norm(world, axis=-1, keepdims=True)
    components = tuple(np.ascontiguousarray(world[..., axis]) for axis in range(3))
    for component in components:
        component.flags.writeable = False
    return components


def object_index_image(scene: Scene, width: int = INDEX_SIZE[0], height: int = INDEX_SIZE[1]) -> np.ndarray:
    """(height, width) int: the index of the front-most object at each pixel, -1 where there is none.

    InputError names the first object whose shape, size, colour or material cannot be drawn.
    """
    owner, _ = _owners(scene, width, height)
    return owner.reshape(height, width)


def visible_pixels_geometric(scene: Scene, width: int = INDEX_SIZE[0], height: int = INDEX_SIZE[1]) -> list[int]:
    """Per object, the pixels of a `width` x `height` image where it is the front-most object."""
    owner, blocks = _owners(scene, width, height)
    counts = [0] * len(scene.objects)
    for index, pixels in blocks:
        counts[index] = int(np.count_nonzero(owner[pixels] == index))
    return counts


def _owners(scene: Scene, width: int, height: int) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    """The front-most object's index at each pixel (flat, -1 for none), and each object's candidate pixels."""
    _check_size(width, height)
    frame = frame_of(scene)
    owner = np.full(height * width, _BACKGROUND, dtype=np.int16)
    depth = np.full(height * width, np.inf)
    blocks = []
    # A ray parallel to a face divides by zero and misses (inf, or nan that compares false): no warnings.
    with np.errstate(divide="ignore", invalid="ignore"):
        for index, pixels, distance in _hits(frame, width, height):
            nearer = distance < depth[pixels]
            depth[pixels[nearer]] = distance[nearer]
            owner[pixels[nearer]] = index
            blocks.append((index, pixels))
    return owner, blocks


def geometric_counter(width: int = INDEX_SIZE[0], height: int = INDEX_SIZE[1]) -> Callable[[Sequence[Scene]], list[list[int]]]:
    """A VisibilityEnforcer's pixel counter: `visible_pixels_geometric` of each scene at `width` x `height`."""
    _check_size(width, height)

    def count(scenes: Sequence[Scene]) -> list[list[int]]:
        return [visible_pixels_geometric(scene, width, height) for scene in scenes]

    return count


def _hits(frame: tuple[FrameObject, ...], width: int, height: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(object index, flat pixel indices, world distance of its surface along each pixel's ray; inf for a miss).

    The objects of one shape are bounded and met with their rays in one go: numpy's cost here
    is per call more than per element.
    """
    rays = pixel_rays(width, height)
    hits = []
    for shape, meet in _HITS.items():
        members = [i for i, item in enumerate(frame) if item.shape == shape]
        if not members:
            continue
        group = _Group(shape, [frame[i] for i in members])
        boxes = _pixel_boxes(group, width, height)
        shown = (boxes[:, 0] < boxes[:, 1]) & (boxes[:, 2] < boxes[:, 3])
        if not shown.any():
            continue
        blocks = [(slice(r0, r1), slice(c0, c1)) for r0, r1, c0, c1 in boxes[shown].tolist()]
        pixels = [_block_pixels(block, width) for block in blocks]
        counts = np.array([len(p) for p in pixels])
        gathered = tuple(np.concatenate([component[block].ravel() for block in blocks]) for component in rays)
        origins, directions = _local_rays(group, shown, counts, gathered)
        distances = meet(origins, directions) * np.repeat(group.radii[shown], counts)
        members = [i for i, keep in zip(members, shown, strict=True) if keep]
        hits += zip(members, pixels, np.split(distances, np.cumsum(counts)[:-1]), strict=True)
    return sorted(hits, key=lambda hit: hit[0])


class _Group:
    """The objects of one shape as arrays: centres (m, 3), radii (m,), axes (m, 3, 3) (rows: the turned x, y, z)."""

    def __init__(self, shape: str, items: list[FrameObject]):
        self.shape = shape
        self.centres = np.array([item.location for item in items], dtype=np.float64)
        self.radii = np.array([item.radius for item in items], dtype=np.float64)
        # Only the cube is not symmetric about z: the others' turns change nothing.
        turns = np.array([item.rotation if shape == "cube" else 0.0 for item in items], dtype=np.float64)
        self.axes = np.zeros((len(items), 3, 3))
        self.axes[:, 0, 0] = self.axes[:, 1, 1] = np.cos(turns)
        self.axes[:, 0, 1] = np.sin(turns)
        self.axes[:, 1, 0] = -self.axes[:, 0, 1]
        self.axes[:, 2, 2] = 1.0


# ---------------------------------------------------------------------- camera side


def _check_size(width: int, height: int) -> None:
    if width < 1 or height < 1 or height > width:
        # The camera fits its sensor to the width; a portrait frame would be another view (Preset.sized).
        raise InputError(f"image size must be positive with width >= height, got {width}x{height}")


def _focal_pixels(width: int) -> float:
    # Blender fits the sensor to the image width when width >= height (Preset.sized demands it).
    return width * CAMERA_LENS_MM / CAMERA_SENSOR_WIDTH_MM


def _unit_outline(shape: str) -> np.ndarray:
    """Points of the unit shape whose projections bound its silhouette (its convex hull's extreme points)."""
    if shape == "cube":
        return np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    angles = np.linspace(0.0, 2.0 * np.pi, _RIM_POINTS, endpoint=False)
    # A circle slightly larger than the rim, so that its inscribed polygon still encloses the rim.
    ring = np.column_stack([np.cos(angles), np.sin(angles)]) / np.cos(np.pi / _RIM_POINTS)
    bottom = np.column_stack([ring, -np.ones(len(ring))])
    top = np.column_stack([ring, np.ones(len(ring))]) if shape == "cylinder" else np.array([[0.0, 0.0, 1.0]])
    return np.concatenate([top, bottom])


_UNIT_OUTLINES = {shape: _unit_outline(shape) for shape in ("cube", "cylinder", "cone")}


def _pixel_boxes(group: _Group, width: int, height: int) -> np.ndarray:
    """(m, 4) rows start, rows stop, columns start, columns stop whose pixel centres may see each object
    (empty when it is out of frame)."""
    if group.shape == "sphere":
        # The rays touching a sphere, exactly: in each image axis, the tangents from the camera.
        centre = (group.centres - _CAMERA_ORIGIN) @ _CAMERA_ROTATION
        depth, across = -centre[:, 2], centre[:, :2]
        angle = np.arctan2(across, depth[:, None])
        spread = np.arcsin(np.minimum(1.0, group.radii[:, None] / np.hypot(across, depth[:, None])))
        limit = np.pi / 2 - 1e-9  # a sphere reaching beside the camera: its extent runs to the border
        low, high = np.tan(np.clip(angle - spread, -limit, limit)), np.tan(np.clip(angle + spread, -limit, limit))
        around_camera = np.hypot(across[:, 0], np.hypot(across[:, 1], depth)) <= group.radii
    else:
        points = np.einsum("pj,mji->mpi", _UNIT_OUTLINES[group.shape], group.axes)
        points = group.centres[:, None, :] + group.radii[:, None, None] * points
        camera = (points - _CAMERA_ORIGIN) @ _CAMERA_ROTATION
        depth = -camera[..., 2]
        tangent = camera[..., :2] / depth[..., None]
        low, high = tangent.min(axis=1), tangent.max(axis=1)
        around_camera = (depth <= 1e-9).any(axis=1)  # some of it at or behind the camera
    focal = _focal_pixels(width)
    # Pixel i's centre sits at i + 0.5: keep every pixel whose centre may fall inside, and one more.
    col0 = np.floor(width / 2 + low[:, 0] * focal) - 1
    col1 = np.ceil(width / 2 + high[:, 0] * focal) + 1
    row0 = np.floor(height / 2 - high[:, 1] * focal) - 1
    row1 = np.ceil(height / 2 - low[:, 1] * focal) + 1
    boxes = np.stack([np.clip(row0, 0, height), np.clip(row1, 0, height),
                      np.clip(col0, 0, width), np.clip(col1, 0, width)], axis=1).astype(np.int64)
    boxes[around_camera] = (0, height, 0, width)
    return boxes


def _block_pixels(block: tuple[slice, slice], width: int) -> np.ndarray:
    """Flat indices of the pixels of a block of rows and columns, row by row."""
    rows, cols = block
    return (np.arange(rows.start, rows.stop)[:, None] * width + np.arange(cols.start, cols.stop)[None, :]).ravel()


def _local_rays(group: _Group, shown: np.ndarray, counts: np.ndarray, rays: Vectors) -> tuple[Vectors, Vectors]:
    """The camera and the rays in the unit frame of each `shown` object, `counts[i]` rays for the i-th.

    An object's frame is turned, scaled and centred so that its shape is the unit shape there. The
    directions stay unit vectors, so a hit's parameter times the radius is its world distance.
    """
    origins = (_CAMERA_ORIGIN - group.centres[shown]) / group.radii[shown, None]
    if group.shape != "cube":  # the other shapes are symmetric about z: their turn changes nothing
        return tuple(np.repeat(origins[:, axis], counts) for axis in range(3)), rays
    axes = group.axes[shown]
    origins = np.einsum("mij,mj->mi", axes, origins)
    origin = tuple(np.repeat(origins[:, axis], counts) for axis in range(3))
    cos, sin = np.repeat(axes[:, 0, 0], counts), np.repeat(axes[:, 0, 1], counts)
    dx, dy, dz = rays
    return origin, (cos * dx + sin * dy, cos * dy - sin * dx, dz)


# ---------------------------------------------------------------------- shapes
# Each takes the camera q and unit ray directions d in the shape's frame, as (k,) components,
# and returns the ray parameter of the first hit in front of the camera (inf for a miss).
# The camera is outside every object in a CLEVR scene; one around the camera would cover it all.


def _slab(origin: np.ndarray, direction: np.ndarray, half: float) -> tuple[np.ndarray, np.ndarray]:
    """The interval of each ray inside -half <= coordinate <= half (+-inf parallel to it, as fits)."""
    inverse = 1.0 / direction
    low, high = (-half - origin) * inverse, (half - origin) * inverse
    return np.minimum(low, high), np.maximum(low, high)


def _first_hit(enter: np.ndarray, leave: np.ndarray, real: np.ndarray | bool = True) -> np.ndarray:
    """The entry into a convex solid from each ray's (enter, leave) interval; inf when empty or behind."""
    return np.where(real & (enter <= leave) & (leave > 0), np.maximum(enter, 0.0), np.inf)


def _roots(a: np.ndarray | float, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Roots (-b -+ sqrt(b^2 - a c)) / a of a t^2 + 2 b t + c where real, and where they are real."""
    discriminant = b * b - a * c
    real = discriminant >= 0
    root = np.sqrt(np.maximum(discriminant, 0.0))
    return (-b - root) / a, (-b + root) / a, real


def _sphere_hits(q: Vectors, d: Vectors) -> np.ndarray:
    near, far, real = _roots(1.0, q[0] * d[0] + q[1] * d[1] + q[2] * d[2], q[0] ** 2 + q[1] ** 2 + q[2] ** 2 - 1.0)
    return _first_hit(near, far, real)


def _cube_hits(q: Vectors, d: Vectors) -> np.ndarray:
    """The rounded cube: the box [-1, 1]^3 where a ray enters the flat part of a face, the rounding elsewhere.

    After Inigo Quilez's rounded-box intersection: the rays that enter the box near an
    edge or corner are mirrored into the first octant and met with the one corner sphere
    and the three edge cylinders there.
    """
    intervals = [_slab(q[axis], d[axis], 1.0) for axis in range(3)]
    enter = np.maximum(np.maximum(intervals[0][0], intervals[1][0]), intervals[2][0])
    leave = np.minimum(np.minimum(intervals[0][1], intervals[1][1]), intervals[2][1])
    distance = _first_hit(enter, leave)
    core = 1.0 - CUBE_ROUNDING
    hit = np.isfinite(distance)
    reached = np.where(hit, distance, 0.0)
    beyond = sum((np.abs(q[axis] + reached * d[axis]) > core).astype(np.int8) for axis in range(3))
    rounded = np.flatnonzero(hit & (beyond >= 2))
    if not rounded.size:
        return distance
    # Mirrored into the first octant, relative to the core box's corner there.
    entry = [q[axis][rounded] + distance[rounded] * d[axis][rounded] for axis in range(3)]
    signs = [np.where(e < 0, -1.0, 1.0) for e in entry]
    ro = [signs[axis] * q[axis][rounded] - core for axis in range(3)]
    rd = [signs[axis] * d[axis][rounded] for axis in range(3)]
    radius2 = CUBE_ROUNDING**2
    near, _, real = _roots(1.0, ro[0] * rd[0] + ro[1] * rd[1] + ro[2] * rd[2], ro[0] ** 2 + ro[1] ** 2 + ro[2] ** 2 - radius2)
    best = np.where(real & (near > 0), near, np.inf)
    for axis in range(3):
        u, v = (a for a in range(3) if a != axis)
        near, _, real = _roots(rd[u] ** 2 + rd[v] ** 2, ro[u] * rd[u] + ro[v] * rd[v], ro[u] ** 2 + ro[v] ** 2 - radius2)
        along = ro[axis] + core + near * rd[axis]  # back from the corner to the box's centre
        edge = real & (near > 0) & (near < best) & (np.abs(along) <= core)
        best = np.where(edge, near, best)
    distance[rounded] = best
    return distance


def _cylinder_hits(q: Vectors, d: Vectors) -> np.ndarray:
    """The cylinder with rounded rims: the sharp cylinder, then the rays entering it at a rim met with the rim."""
    near, far, real = _roots(d[0] ** 2 + d[1] ** 2, q[0] * d[0] + q[1] * d[1], q[0] ** 2 + q[1] ** 2 - 1.0)
    low, high = _slab(q[2], d[2], 1.0)
    distance = _first_hit(np.maximum(near, low), np.minimum(far, high), real)
    core = 1.0 - CYLINDER_ROUNDING
    reached = np.where(np.isfinite(distance), distance, 0.0)
    rim = np.isfinite(distance) & (np.abs(q[2] + reached * d[2]) > core)
    rim[rim] = np.hypot(q[0][rim] + reached[rim] * d[0][rim], q[1][rim] + reached[rim] * d[1][rim]) > core
    rim = np.flatnonzero(rim)
    if rim.size:
        distance[rim] = _rim_hits(tuple(c[rim] for c in q), tuple(c[rim] for c in d), distance[rim])
    return distance


def _rim_hits(q: Vectors, d: Vectors, start: np.ndarray) -> np.ndarray:
    """Rays that enter the sharp cylinder within a rim's rounding, met with the rounded rim.

    Such a ray hits the cylinder exactly when it passes within the rounding radius of the rim's
    core circle (radius 1 - rounding, at z = +-(1 - rounding)). Over the rounding's width that
    circle is straight to a fortieth of the rounding, so each ray is met with the circle's
    tangent line (a thin cylinder around it) at the point nearest the ray, found in a few rounds.
    """
    core, radius = 1.0 - CYLINDER_ROUNDING, CYLINDER_ROUNDING
    wz = q[2] - np.where(q[2] + start * d[2] > 0, core, -core)
    t = start
    for _ in range(_RIM_ROUNDS):
        x, y = q[0] + t * d[0], q[1] + t * d[1]
        norm = np.hypot(x, y)
        ux, uy = x / norm, y / norm
        # The ray from the line through (core * u, +-core) along the tangent (-uy, ux, 0).
        wx, wy = q[0] - core * ux, q[1] - core * uy
        along_w, along_d = wy * ux - wx * uy, d[1] * ux - d[0] * uy
        a = 1.0 - along_d**2
        b = wx * d[0] + wy * d[1] + wz * d[2] - along_w * along_d
        c = wx**2 + wy**2 + wz**2 - along_w**2 - radius**2
        first, _, real = _roots(a, b, c)
        t = np.where(real, first, -b / a)  # the hit, else the ray's nearest approach to the line
    return np.where(real, t, np.inf)


def _cone_hits(q: Vectors, d: Vectors) -> np.ndarray:
    # Inside the double cone x^2 + y^2 <= ((1 - z) / 2)^2; within the slab -1 <= z <= 1 only the
    # lower nappe remains (the upper one meets the slab at the apex alone).
    a = d[0] ** 2 + d[1] ** 2 - d[2] ** 2 / 4
    b = q[0] * d[0] + q[1] * d[1] + (1 - q[2]) * d[2] / 4
    c = q[0] ** 2 + q[1] ** 2 - (1 - q[2]) ** 2 / 4
    low, high = _slab(q[2], d[2], 1.0)
    # Shallower than the side (a > 0): inside between the roots. Steeper (a < 0): inside before
    # the first root or after the second (the roots swap order), and only one of those meets the slab.
    first, second, real = _roots(a, b, c)
    first, second = np.minimum(first, second), np.maximum(first, second)
    between = _first_hit(np.maximum(first, low), np.minimum(second, high), real)
    outer = np.minimum(_first_hit(low, np.minimum(first, high)), _first_hit(np.maximum(second, low), high))
    steep = np.where(real, outer, _first_hit(low, high))
    return np.where(a > 0, between, steep)


_HITS: dict[str, Callable[[Vectors, Vectors], np.ndarray]] = {
    "sphere": _sphere_hits, "cube": _cube_hits, "cylinder": _cylinder_hits, "cone": _cone_hits,
}
