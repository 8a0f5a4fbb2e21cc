"""Regions follow the camera frame and agree with the ASP region relations; set-answer metrics."""

from __future__ import annotations

import numpy as np
import pytest

from clevr_game.asp import exact_accuracy, jaccard, mean_jaccard, regions_of
from clevr_game.errors import InputError
from clevr_game.scene import DEFAULT_DIRECTIONS, RELATION_THRESHOLD


def test_quadrants_of_the_camera_frame() -> None:
    right = np.array(DEFAULT_DIRECTIONS["right"][:2])
    front = np.array(DEFAULT_DIRECTIONS["front"][:2])
    points = np.array([-right - front, right - front, -right + front, right + front])
    assert regions_of(points).tolist() == [0, 1, 2, 3]
    assert regions_of(np.column_stack([points, np.ones(4)])).tolist() == [0, 1, 2, 3]
    assert regions_of(np.zeros((0, 2))).shape == (0,)


def test_clevr_relations_imply_the_region_relations() -> None:
    # right_R(B, A): B may be right of A; when A is in the right half (1, 3), so is B. Likewise front.
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-3, 3, (20000, 2)), rng.uniform(-3, 3, (20000, 2))
    ra, rb = regions_of(a), regions_of(b)
    for direction, half in (("right", {1, 3}), ("front", {2, 3}), ("left", {0, 2}), ("behind", {0, 1})):
        related = (b - a) @ np.array(DEFAULT_DIRECTIONS[direction][:2]) > RELATION_THRESHOLD
        in_half_a = np.isin(ra, list(half))
        assert related.sum() > 1000
        assert np.isin(rb[related & in_half_a], list(half)).all(), direction


def test_set_metrics() -> None:
    assert jaccard(["red", "blue"], ["blue"]) == 0.5
    assert jaccard([], []) == 1.0
    assert jaccard(["cube"], ["sphere"]) == 0.0
    predicted = [["red"], ["cube", "sphere"], ["metal"]]
    true = [["red"], ["sphere"], ["rubber"]]
    assert exact_accuracy(predicted, true) == pytest.approx(1 / 3)
    assert mean_jaccard(predicted, true) == pytest.approx((1 + 0.5 + 0) / 3)
    assert exact_accuracy([["b", "a"]], [("a", "b")]) == 1.0
    with pytest.raises(InputError, match="2 predicted answers for 1 items"):
        exact_accuracy([["a"], ["b"]], [["a"]])
