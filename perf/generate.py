"""Scene generation speed: the project's pooled sampler against CLEVR's per-object rejection loop.

Run: python -m perf.generate
"""

from __future__ import annotations

import math
import random

import numpy as np

from clevr_game.generate import generate_scene
from clevr_game.layout import BOUND, MIN_GAP, MIN_MARGIN
from clevr_game.scene import DEFAULT_DIRECTIONS
from clevr_game.vocab import CLEVR
from perf.timing import print_table, rate, row


def clevr_style_layout(rng: random.Random, num_objects: int, max_retries: int = 50) -> list[tuple]:
    """The baseline: CLEVR's render_images.py loop (retry an object, restart the scene when stuck)."""
    left, front = DEFAULT_DIRECTIONS["left"], DEFAULT_DIRECTIONS["front"]
    while True:
        placed: list[tuple[float, float, float]] = []
        for _ in range(num_objects):
            r = rng.choice(list(CLEVR.size_radius.values()))
            for _attempt in range(max_retries):
                x, y = rng.uniform(-BOUND, BOUND), rng.uniform(-BOUND, BOUND)
                fits = True
                for xx, yy, rr in placed:
                    dx, dy = x - xx, y - yy
                    if math.hypot(dx, dy) - r - rr < MIN_GAP:
                        fits = False
                        break
                    if any(abs(dx * d[0] + dy * d[1]) < MIN_MARGIN for d in (left, front)):
                        fits = False
                        break
                if fits:
                    placed.append((x, y, r))
                    break
            else:
                break
        if len(placed) == num_objects:
            return placed


def run(quick: bool = False) -> list[dict]:
    batch = 20 if quick else 100
    py_rng = random.Random(0)
    baseline = rate(lambda: sum(1 for _ in range(batch) if clevr_style_layout(py_rng, 10)))
    np_rng = np.random.default_rng(0)
    value = rate(lambda: sum(1 for _ in range(batch) if generate_scene(np_rng, 10)))
    return [row("valid 10-object scenes (full Scene objects)", "scenes/s", baseline, value,
                ">= 1000 scenes/s on one core")]


if __name__ == "__main__":
    print_table(run())
