"""Rendering throughput: persistent workers against a fresh Blender per image, in-place updates
against a full rebuild, the image cache against rendering, two workers against one.

Run: python -m benchmarks.perf_render [--quick]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.timing import print_table, row
from clevr_game.generate import generate_scenes
from clevr_game.render import Renderer
from clevr_game.render.frame import frame_of
from clevr_game.render.pool import Job, WorkerPool
from clevr_game.render.presets import WORKBENCH, Preset, get_preset
from clevr_game.render.worker import WorkerConfig
from clevr_game.scene import Scene


def _per_second(count: int, work: Callable[[int], None]) -> float:
    """Items per second of `work(i)` for i in range(count)."""
    start = time.perf_counter()
    for i in range(count):
        work(i)
    return count / (time.perf_counter() - start)


def _jittered(scene: Scene, count: int, seed: int = 0) -> list[Scene]:
    """`count` copies of `scene` whose objects moved a little: only positions change between them."""
    rng = np.random.default_rng(seed)
    coords = scene.coords()
    return [scene.with_coords(coords + np.column_stack([rng.uniform(-0.2, 0.2, (len(coords), 2)),
                                                         np.zeros(len(coords))]))
            for _ in range(count)]


def _pool(preset: Preset) -> WorkerPool:
    return WorkerPool(lambda slot, size: WorkerConfig(preset, None, (preset.width, preset.height)), 1)


def _render_job(scene: Scene, path: Path, rebuild: bool) -> Job:
    return Job(("render", frame_of(scene), str(path), rebuild), f"rendering {path.name}")


def preset_rows(preset: Preset, scenes: list[Scene], frames: int, folder: Path) -> list[dict]:
    label = f"{preset.name} {preset.width}x{preset.height}"
    moved = _jittered(scenes[0], frames)

    def fresh_blender(i: int) -> None:  # what a script that starts Blender per image pays
        pool = _pool(preset)
        try:
            pool.run([_render_job(scenes[i], folder / "fresh.png", False)])
        finally:
            pool.close()

    pool = _pool(preset)
    try:
        pool.run([_render_job(scenes[0], folder / "warm.png", False)])  # start-up and first-frame costs
        persistent = _per_second(frames, lambda i: pool.run([_render_job(scenes[i], folder / "p.png", False)]))
        rebuilt = _per_second(frames, lambda i: pool.run([_render_job(moved[i], folder / "r.png", True)]))
        in_place = _per_second(frames, lambda i: pool.run([_render_job(moved[i], folder / "m.png", False)]))
    finally:
        pool.close()
    fresh = _per_second(min(frames, 2), fresh_blender)
    # Path-traced frames take seconds on a CPU: count them per minute so the table shows them.
    unit, scale = ("img/s", 1.0) if preset.engine == WORKBENCH else ("img/min", 60.0)
    return [
        row(f"{label}: persistent worker vs Blender per image", unit, fresh * scale, persistent * scale, ">= 1x"),
        row(f"{label}: moved in place vs full rebuild", unit, rebuilt * scale, in_place * scale, ">= 1x"),
    ]


def cache_and_worker_rows(scenes: list[Scene], size: tuple[int, int], folder: Path) -> list[dict]:
    preset = get_preset("fast", *size)
    count = len(scenes)
    rows = []
    with Renderer(preset, use_cache=False) as one:
        one.start()
        one.render(scenes[0], folder / "w.png")
        single = _per_second(1, lambda _: one.render_many(scenes, folder / "one"))
        frames = [s for s in scenes if s.objects]
        renders = _per_second(count, lambda i: one.render(scenes[i], folder / "x.png"))
        checks = _per_second(len(frames), lambda i: one.visible_pixels(frames[i]))
    with Renderer(preset, workers=2, use_cache=False) as two:
        two.render_many(scenes[:2], folder / "warm")  # one first frame (OpenGL start-up) per worker
        double = _per_second(1, lambda _: two.render_many(scenes, folder / "two"))
    with Renderer(preset, cache_dir=folder / "cache") as cached:
        cached.render_many(scenes, folder / "fill")
        hits = _per_second(count, lambda i: cached.render(scenes[i], folder / "hit.png"))
        assert cached.stats.cache_hits == count
    rows.append(row(f"fast {size[0]}x{size[1]}: {count} images, 2 workers vs 1", "img/s",
                    single * count, double * count, ">= 1x (2 cores shared)"))
    rows.append(row(f"fast {size[0]}x{size[1]}: cache hit vs render", "img/s", renders, hits, ">= 10x"))
    rows.append(row(f"visibility (index pass 320x240) vs fast render {size[0]}x{size[1]}", "checks/s",
                    renders, checks, ">= 1x"))
    return rows


def visibility_rows(scenes: list[Scene], size: tuple[int, int]) -> list[dict]:
    """The game's visibility check of a moved scene against rendering that scene for a pixel player."""
    moved = _jittered(scenes[0], len(scenes), seed=1)
    with Renderer(get_preset("fast", *size), use_cache=False) as renderer, \
            tempfile.TemporaryDirectory(prefix="perf-visibility-") as tmp:
        renderer.render(scenes[0], Path(tmp) / "warm.png")
        renderer.visible_pixels(scenes[1])
        renders = _per_second(len(moved), lambda i: renderer.render(moved[i], Path(tmp) / "m.png"))
        checks = _per_second(len(moved), lambda i: renderer.visible_pixels(moved[i]))
    return [row(f"visibility check (index pass 320x240) vs rendering the moved scene (fast {size[0]}x{size[1]}, "
                "a pixel player's image)", "scenes/s", renders, checks, ">= 5x (check <= 1/5 of the render)")]


def run(quick: bool = False) -> list[dict]:
    scenes = list(generate_scenes(12 if quick else 24, seed=0))
    with tempfile.TemporaryDirectory(prefix="perf-render-") as tmp:
        folder = Path(tmp)
        rows = []
        if quick:
            rows += preset_rows(get_preset("fast", 64, 48), scenes, 4, folder)
            rows += preset_rows(get_preset("balanced", 64, 48), scenes, 2, folder)
            rows += cache_and_worker_rows(scenes, (64, 48), folder)
        else:
            rows += preset_rows(get_preset("fast"), scenes, 10, folder)
            rows += preset_rows(get_preset("balanced"), scenes, 3, folder)
            # A full-size clevr frame takes minutes on a CPU; a quarter of its pixels shows the trend.
            rows += preset_rows(get_preset("clevr", 240, 160), scenes, 1, folder)
            rows += cache_and_worker_rows(scenes, (320, 240), folder)
        rows += visibility_rows(scenes, (128, 96))
    return rows


if __name__ == "__main__":
    print_table(run(quick="--quick" in sys.argv))
