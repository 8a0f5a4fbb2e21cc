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
few pixels along an outline (perf/render.py `visibility_agreement`).
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
_RIM_POINTS = 16  # points on a rim whose projections bound its ellipse, within 2% of the radius

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


def hidden_objects_geometric(scene: Scene, min_pixels: int | None = None) -> list[int]:
    """Indices of objects showing fewer than CLEVR's 200 pixels at the index pass's 320 x 240.

    The geometric stand-in for `Renderer.hidden_objects`: the same verdict on 99.96% of
    objects (docs/rendering.md), in milliseconds and without Blender.
    """
    from clevr_game.render.renderer import CLEVR_MIN_PIXELS

    threshold = CLEVR_MIN_PIXELS if min_pixels is None else min_pixels
    return [i for i, count in enumerate(visible_pixels_geometric(scene)) if count < threshold]


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

    All objects are bounded at once, and those of one shape met with their rays in one go:
    numpy's cost here is per call more than per element.
    """
    objects = _Objects(frame)
    boxes = _pixel_boxes(objects, width, height)
    shown = (boxes[:, 0] < boxes[:, 1]) & (boxes[:, 2] < boxes[:, 3])
    rays = pixel_rays(width, height)
    hits = []
    for shape, meet in _HITS.items():
        members = np.flatnonzero(shown & (objects.shapes == shape))
        if not members.size:
            continue
        blocks = [(slice(r0, r1), slice(c0, c1)) for r0, r1, c0, c1 in boxes[members].tolist()]
        pixels = [_block_pixels(block, width) for block in blocks]
        counts = np.array([len(p) for p in pixels])
        gathered = tuple(np.concatenate([component[block].ravel() for block in blocks]) for component in rays)
        origins, directions = _local_rays(objects, members, counts, gathered)
        distances = meet(origins, directions) * np.repeat(objects.radii[members], counts)
        hits += zip(members.tolist(), pixels, np.split(distances, np.cumsum(counts)[:-1]), strict=True)
    return sorted(hits, key=lambda hit: hit[0])


class _Objects:
    """A frame's objects as arrays: shapes, centres (n, 3), radii, and the cosine and sine of each turn.

    Only the cube is not symmetric about z: the other shapes' turns change nothing and count as 0.
    """

    def __init__(self, frame: tuple[FrameObject, ...]):
        self.shapes = np.array([item.shape for item in frame], dtype=object)
        self.centres = np.array([item.location for item in frame], dtype=np.float64).reshape(-1, 3)
        self.radii = np.array([item.radius for item in frame], dtype=np.float64)
        turns = np.array([item.rotation if item.shape == "cube" else 0.0 for item in frame], dtype=np.float64)
        self.cos, self.sin = np.cos(turns), np.sin(turns)


# ---------------------------------------------------------------------- camera side


def _check_size(width: int, height: int) -> None:
    if width < 1 or height < 1 or height > width:
        # The camera fits its sensor to the width; a portrait frame would be another view (Preset.sized).
        raise InputError(f"image size must be positive with width >= height, got {width}x{height}")


def _focal_pixels(width: int) -> float:
    # Blender fits the sensor to the image width when width >= height (Preset.sized demands it).
    return width * CAMERA_LENS_MM / CAMERA_SENSOR_WIDTH_MM


def _unit_outlines() -> tuple[np.ndarray, np.ndarray]:
    """Points whose projections bound a unit shape's silhouette, as many for each: the cube's corners
    (repeated), and for the others the two rims of the unit cylinder, which holds the sphere and the cone."""
    angles = np.linspace(0.0, 2.0 * np.pi, _RIM_POINTS, endpoint=False)
    # Circles slightly larger than the rims, so that their inscribed polygons still enclose the rims.
    ring = np.column_stack([np.cos(angles), np.sin(angles)]) / np.cos(np.pi / _RIM_POINTS)
    rims = np.concatenate([np.column_stack([ring, np.full(len(ring), z)]) for z in (-1.0, 1.0)])
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    return np.resize(corners, rims.shape), rims


_CUBE_OUTLINE, _ROUND_OUTLINE = _unit_outlines()


def _pixel_boxes(objects: _Objects, width: int, height: int) -> np.ndarray:
    """(n, 4) rows start, rows stop, columns start, columns stop whose pixel centres may see each object
    (empty when it is out of frame)."""
    local = np.where((objects.shapes == "cube")[:, None, None], _CUBE_OUTLINE, _ROUND_OUTLINE)
    cos, sin = objects.cos[:, None], objects.sin[:, None]
    turned = np.stack([cos * local[..., 0] - sin * local[..., 1], sin * local[..., 0] + cos * local[..., 1],
                       local[..., 2]], axis=-1)
    camera = (objects.centres[:, None, :] + objects.radii[:, None, None] * turned - _CAMERA_ORIGIN) @ _CAMERA_ROTATION
    depth = -camera[..., 2]
    tangent = camera[..., :2] / depth[..., None]
    low, high = tangent.min(axis=1), tangent.max(axis=1)
    focal = _focal_pixels(width)
    # Pixel i's centre sits at i + 0.5: keep every pixel whose centre may fall inside, and one more.
    bounds = np.stack([np.floor(height / 2 - high[:, 1] * focal) - 1, np.ceil(height / 2 - low[:, 1] * focal) + 1,
                       np.floor(width / 2 + low[:, 0] * focal) - 1, np.ceil(width / 2 + high[:, 0] * focal) + 1], axis=1)
    boxes = np.clip(bounds, 0, [height, height, width, width]).astype(np.int64)
    boxes[(depth <= 1e-9).any(axis=1)] = (0, height, 0, width)  # some of it at or behind the camera
    return boxes


def _block_pixels(block: tuple[slice, slice], width: int) -> np.ndarray:
    """Flat indices of the pixels of a block of rows and columns, row by row."""
    rows, cols = block
    return (np.arange(rows.start, rows.stop)[:, None] * width + np.arange(cols.start, cols.stop)[None, :]).ravel()


def _local_rays(objects: _Objects, members: np.ndarray, counts: np.ndarray, rays: Vectors) -> tuple[Vectors, Vectors]:
    """The camera and the rays in the unit frame of each of `members` (all of one shape), `counts[i]` rays
    for the i-th.

    An object's frame is turned, scaled and centred so that its shape is the unit shape there. The
    directions stay unit vectors, so a hit's parameter times the radius is its world distance.
    """
    origins = (_CAMERA_ORIGIN - objects.centres[members]) / objects.radii[members, None]
    cos, sin = objects.cos[members], objects.sin[members]
    turned = (cos * origins[:, 0] + sin * origins[:, 1], cos * origins[:, 1] - sin * origins[:, 0], origins[:, 2])
    origin = tuple(np.repeat(component, counts) for component in turned)
    if objects.shapes[members[0]] != "cube":
        return origin, rays
    cos, sin = np.repeat(cos, counts), np.repeat(sin, counts)
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
