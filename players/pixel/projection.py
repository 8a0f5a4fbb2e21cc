"""CLEVR's fixed camera, both ways: ground coordinates to sub-pixel image points and back.

`clevr_game.scene.project_to_pixels` rounds to whole pixels; perception needs
the exact point to learn sub-pixel offsets, and the inverse to turn a perceived
image point back into world coordinates. An object stands on the ground, so
its centre lies at height z = its radius: the ray through the image point meets
that plane in exactly one point.
"""

from __future__ import annotations

import numpy as np

from clevr_game.scene import CAMERA_LENS_MM, CAMERA_MATRIX_WORLD, CAMERA_SENSOR_WIDTH_MM

_ROTATION = CAMERA_MATRIX_WORLD[:3, :3]
_ROTATION_INVERSE = np.linalg.inv(_ROTATION)  # the stored matrix is orthonormal only to 1e-7
_ORIGIN = CAMERA_MATRIX_WORLD[:3, 3]
_FOCAL = CAMERA_LENS_MM / CAMERA_SENSOR_WIDTH_MM  # focal length in sensor widths


def image_points(coords: np.ndarray, width: int, height: int) -> np.ndarray:
    """(N, 3) world coordinates -> (N, 2) float image points (x right, y down, in pixels)."""
    camera = (np.asarray(coords, dtype=np.float64).reshape(-1, 3) - _ORIGIN) @ _ROTATION
    depth = -camera[:, 2]
    u = 0.5 + camera[:, 0] / depth * _FOCAL
    v = 0.5 + camera[:, 1] / depth * _FOCAL * width / height
    return np.stack([u * width, height - v * height], axis=1)


def ground_points(points: np.ndarray, heights: np.ndarray, width: int, height: int) -> np.ndarray:
    """(N, 2) image points and (N,) centre heights -> (N, 3) world coordinates on those planes."""
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    heights = np.asarray(heights, dtype=np.float64).reshape(-1)
    u = points[:, 0] / width
    v = 1.0 - points[:, 1] / height
    # Camera-frame ray at depth 1 (the camera looks down its -z axis).
    rays = np.stack([(u - 0.5) / _FOCAL, (v - 0.5) / (_FOCAL * width / height), -np.ones_like(u)], axis=1)
    directions = rays @ _ROTATION_INVERSE
    # The camera looks down at the table, so every ray in the frame falls towards the ground.
    distance = (heights - _ORIGIN[2]) / directions[:, 2]
    return _ORIGIN + distance[:, None] * directions
