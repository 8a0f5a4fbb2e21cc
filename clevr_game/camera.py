"""The camera of CLEVR's scenes: its placement, CLEVR's `directions`, projection to pixels.

Apart from `clevr_game.scene` so that what only needs the camera's frame (the CLEVR-POC
regions) does not import the scenes that use it.
"""

from __future__ import annotations

import numpy as np

# The camera of CLEVR's base_scene.blend (matrix_world read with bpy 5.0.1); CLEVR
# jittered its location per image, so real pixel_coords differ by a few pixels.
CAMERA_MATRIX_WORLD = np.array(
    [
        [0.6563112735748291, -0.35794052481651306, 0.664179265499115, 7.481131553649902],
        [0.7544902563095093, 0.3113630414009094, -0.5777521133422852, -6.5076398849487305],
        [1.4901161193847656e-08, 0.8803019523620605, 0.47441375255584717, 5.34366512298584],
        [0.0, 0.0, 0.0, 1.0],
    ]
)
CAMERA_LENS_MM = 35.0
CAMERA_SENSOR_WIDTH_MM = 32.0
IMAGE_WIDTH = 480
IMAGE_HEIGHT = 320


def _ground_direction(vector: np.ndarray) -> tuple[float, float, float]:
    flat = np.array([vector[0], vector[1], 0.0])
    flat /= np.linalg.norm(flat)
    return (float(flat[0]), float(flat[1]), float(flat[2]))


def camera_directions(matrix_world: np.ndarray = CAMERA_MATRIX_WORLD) -> dict[str, tuple[float, float, float]]:
    """CLEVR's `directions`: the camera's right and backward axes projected on the ground."""
    rotation = matrix_world[:3, :3]
    right = _ground_direction(rotation @ np.array([1.0, 0.0, 0.0]))
    behind = _ground_direction(rotation @ np.array([0.0, 0.0, -1.0]))
    neg = lambda v: tuple(-x for x in v)  # noqa: E731
    return {
        "right": right,
        "behind": behind,
        "above": (0.0, 0.0, 1.0),
        "below": (0.0, 0.0, -1.0),
        "left": neg(right),
        "front": neg(behind),
    }


DEFAULT_DIRECTIONS = camera_directions()


def project_to_pixels(
    coords: np.ndarray,
    width: int = IMAGE_WIDTH,
    height: int = IMAGE_HEIGHT,
    matrix_world: np.ndarray = CAMERA_MATRIX_WORLD,
) -> np.ndarray:
    """(N, 3) world coordinates -> (N, 3) CLEVR pixel_coords (x, y from top-left, depth)."""
    rotation = matrix_world[:3, :3]
    origin = matrix_world[:3, 3]
    offset = np.asarray(coords, dtype=np.float64) - origin
    # Elementwise sums in a fixed order, not a BLAS product: BLAS picks fused multiply-adds or not
    # by CPU, which moved depth's last digit between machines and so the bytes of written scenes.
    cam = offset[:, 0:1] * rotation[0] + offset[:, 1:2] * rotation[1] + offset[:, 2:3] * rotation[2]
    depth = -cam[:, 2]
    scale = CAMERA_LENS_MM / CAMERA_SENSOR_WIDTH_MM
    u = 0.5 + cam[:, 0] / depth * scale
    v = 0.5 + cam[:, 1] / depth * scale * width / height
    return np.stack([np.round(u * width), np.round(height - v * height), depth], axis=1)
