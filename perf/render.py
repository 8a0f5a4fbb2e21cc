"""Rendering throughput: persistent workers against a fresh Blender per image, in-place updates
against a full rebuild, the image cache against rendering, two workers against one; the
visibility check (index pass, geometric count) against rendering the moved scene, and how
well the geometric count agrees with the index pass.

Run: python -m perf.render [--quick]
     python -m perf.render --visibility [SCENES]   (visibility rows and agreement only)
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clevr_game.generate import generate_scenes
from clevr_game.layout import MIN_GAP, first_violation
from clevr_game.render import Renderer
from clevr_game.render.frame import frame_of
from clevr_game.render.pool import Job, WorkerPool
from clevr_game.render.presets import WORKBENCH, Preset, get_preset
from clevr_game.render.renderer import CLEVR_MIN_PIXELS
from clevr_game.render.silhouettes import visible_pixels_geometric
from clevr_game.render.worker import WorkerConfig
from clevr_game.scene import (
    CAMERA_LENS_MM,
    CAMERA_MATRIX_WORLD,
    CAMERA_SENSOR_WIDTH_MM,
    DEFAULT_DIRECTIONS,
    Scene,
)
from clevr_game.vocab import CLEVR_POC
from perf.timing import print_table, row


def _per_second(count: int, work: Callable[[int], None]) -> float:
    """Items per second of `work(i)` for i in range(count)."""
    start = time.perf_counter()
    for i in range(count):
        work(i)
    return count / (time.perf_counter() - start)


def _best_of_three(measure: Callable[[], float]) -> float:
    return max(measure() for _ in range(3))


def _each_per_second(scenes: list[Scene], work: Callable[[Scene], object]) -> float:
    return _per_second(len(scenes), lambda i: work(scenes[i]))


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


def visibility_rows(scenes: list[Scene], size: tuple[int, int], agreement_scenes: int = 60) -> list[dict]:
    """The game's visibility checks of a moved scene against rendering that scene for a pixel player,
    and how often the geometric count gives the index pass's verdict."""
    moved = _jittered(scenes[0], len(scenes), seed=1)
    with Renderer(get_preset("fast", *size), use_cache=False) as renderer, \
            tempfile.TemporaryDirectory(prefix="perf-visibility-") as tmp:
        renderer.render(scenes[0], Path(tmp) / "warm.png")
        renderer.visible_pixels(scenes[1])
        visible_pixels_geometric(scenes[1])
        # The best of three passes for each, so another process's burst on shared cores skews no ratio;
        # the index pass remembers counts per layout, hence a fresh jitter per pass.
        passes = iter([_jittered(scenes[0], len(scenes), seed=seed) for seed in (2, 3, 4)])
        renders = _best_of_three(lambda: _per_second(len(moved), lambda i: renderer.render(moved[i], Path(tmp) / "m.png")))
        checks = _best_of_three(lambda: _each_per_second(next(passes), renderer.visible_pixels))
        geometric = _best_of_three(lambda: _each_per_second(moved, visible_pixels_geometric))
        agreement = visibility_agreement(visibility_test_scenes(agreement_scenes), renderer)
    image = f"fast {size[0]}x{size[1]}, a pixel player's image"
    return [
        row(f"visibility check (index pass 320x240) vs rendering the moved scene ({image})", "scenes/s",
            renders, checks, ">= 5x (check <= 1/5 of the render)"),
        row(f"visibility check (geometric 320x240) vs rendering the moved scene ({image})", "scenes/s",
            renders, geometric, ">= 5x (check <= 1/5 of the render)"),
        row(f"geometric vs index pass: same verdict, {agreement.objects} objects of {agreement.scenes} scenes",
            "%", 100.0, 100.0 * agreement.verdicts_agreeing, ">= 99.5%"),
    ]


# ------------------------------------------------------------------ visibility agreement

_SPOT_DRAWS = 50


def _ground_point(column: float, row_: float, height: float) -> np.ndarray:
    """Where the ray through image point (column, row) of the 320 x 240 frame meets the plane z = height;
    the point may lie outside the frame."""
    focal = 320 * CAMERA_LENS_MM / CAMERA_SENSOR_WIDTH_MM
    rotation, origin = CAMERA_MATRIX_WORLD[:3, :3], CAMERA_MATRIX_WORLD[:3, 3]
    direction = rotation @ np.array([(column - 160) / focal, (120 - row_) / focal, -1.0])
    return origin + direction * (height - origin[2]) / direction[2]


def _behind_another(scene: Scene, rng: np.random.Generator) -> Scene | None:
    """One object moved behind another as the camera sees it (grazed to fully hidden), in a valid layout;
    None when a few draws find no valid spot."""
    radii, coords = scene.radii(), scene.coords()
    behind, right = (np.array(DEFAULT_DIRECTIONS[name][:2]) for name in ("behind", "right"))
    for _ in range(_SPOT_DRAWS):
        hidden, front = rng.choice(len(scene.objects), 2, replace=False)
        reach = radii[hidden] + radii[front]
        coords[hidden, :2] = coords[front, :2] + behind * rng.uniform(reach + MIN_GAP, reach + 2.0) \
            + right * rng.uniform(-reach, reach)
        if first_violation(coords, radii) is None:
            return scene.with_coords(coords)
        coords = scene.coords()
    return None


def _at_the_border(scene: Scene, rng: np.random.Generator) -> Scene | None:
    """One object's centre moved to an edge of the frame, from a little inside to a little outside it,
    clear of the others (possibly off CLEVR's board); None when a few draws find no clear spot."""
    radii = scene.radii()
    for _ in range(_SPOT_DRAWS):
        moved = rng.integers(len(scene.objects))
        across = rng.uniform(-15.0, 15.0)  # pixels from the edge to the centre, negative outside
        column, row_ = rng.uniform(20.0, 300.0), rng.uniform(20.0, 220.0)
        edge = rng.integers(4)
        if edge < 2:
            column = across if edge == 0 else 320 - across
        else:
            row_ = across if edge == 2 else 240 - across
        coords = scene.coords()
        coords[moved] = _ground_point(column, row_, coords[moved, 2])
        others = np.arange(len(coords)) != moved
        gaps = np.linalg.norm(coords[others, :2] - coords[moved, :2], axis=1) - radii[others] - radii[moved]
        if np.all(gaps >= MIN_GAP):
            return scene.with_coords(coords)
    return None


def visibility_test_scenes(count: int, seed: int = 0) -> list[Scene]:
    """`count` scenes in four kinds: generated CLEVR, generated CLEVR-POC (cones, medium size),
    an object moved behind another (a valid layout, as the game judges visibility only for those),
    an object moved to the frame's border."""
    rng = np.random.default_rng(seed)
    quarter = max(1, count // 4)
    clevr = list(generate_scenes(quarter, seed=seed))
    poc = list(generate_scenes(quarter, seed=seed + 1, vocabulary=CLEVR_POC))
    both = clevr + poc
    occluded = _moved(both, quarter, _behind_another, rng)
    border = _moved(both, count - 3 * quarter, _at_the_border, rng)
    return clevr + poc + occluded + border


def _moved(scenes: list[Scene], count: int, move: Callable[[Scene, np.random.Generator], Scene | None],
           rng: np.random.Generator) -> list[Scene]:
    """`count` scenes made by `move` from `scenes` in turn (skipping those it finds no move for)."""
    made: list[Scene] = []
    for i in range(count * _SPOT_DRAWS):
        if len(made) == count:
            break
        scene = move(scenes[i % len(scenes)], rng)
        if scene is not None:
            made.append(scene)
    return made


@dataclass
class VisibilityAgreement:
    """The geometric count against the index pass, per object over a set of scenes."""

    scenes: int
    objects: int
    absolute_errors: np.ndarray
    relative_errors: np.ndarray
    """|geometric - index| / index, for objects the index pass sees at least `min_pixels` of."""
    verdicts_agreeing: float
    disagreements: list[tuple[int, int]]
    """(index pass, geometric) counts of each object judged differently."""
    min_pixels: float
    near_threshold: np.ndarray
    """|geometric - index| of the objects the index pass counts within half the threshold of it."""

    def lines(self) -> list[str]:
        absolute, relative = self.absolute_errors, self.relative_errors
        return [
            f"{self.objects} objects in {self.scenes} scenes; threshold {self.min_pixels:g} pixels at 320x240",
            f"|geometric - index| pixels: mean {absolute.mean():.2f}, median {np.median(absolute):.0f}, "
            f"95th percentile {np.percentile(absolute, 95):.0f}, max {absolute.max():.0f}",
            f"relative (objects showing >= {self.min_pixels:g}): mean {100 * relative.mean():.2f}%, "
            f"95th percentile {100 * np.percentile(relative, 95):.2f}%, max {100 * relative.max():.2f}%",
            f"near the threshold ({self.min_pixels / 2:g} to {1.5 * self.min_pixels:g} by the index pass): "
            f"{len(self.near_threshold)} objects, |geometric - index| max "
            f"{self.near_threshold.max() if len(self.near_threshold) else 0:.0f}",
            f"verdict agreement: {100 * self.verdicts_agreeing:.2f}% "
            f"({len(self.disagreements)} differ: (index, geometric) {self.disagreements})",
        ]


def visibility_agreement(scenes: list[Scene], renderer: Renderer,
                         min_pixels: float = CLEVR_MIN_PIXELS) -> VisibilityAgreement:
    """Counts of `renderer`'s index pass (at 320 x 240) against `visible_pixels_geometric` on `scenes`."""
    index = np.concatenate([renderer.visible_pixels(scene) for scene in scenes])
    geometric = np.concatenate([visible_pixels_geometric(scene) for scene in scenes])
    same = (index < min_pixels) == (geometric < min_pixels)
    seen = index >= min_pixels
    return VisibilityAgreement(
        scenes=len(scenes), objects=len(index), absolute_errors=np.abs(geometric - index),
        relative_errors=np.abs(geometric - index)[seen] / index[seen], verdicts_agreeing=float(same.mean()),
        disagreements=[(int(i), int(g)) for i, g in zip(index[~same], geometric[~same], strict=True)],
        min_pixels=min_pixels, near_threshold=np.abs(geometric - index)[np.abs(index - min_pixels) <= min_pixels / 2])


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


def _visibility_report(count: int) -> None:
    scenes = visibility_test_scenes(count)
    with Renderer("fast", use_cache=False) as renderer:
        agreement = visibility_agreement(scenes, renderer)
    print("\n".join(agreement.lines()))
    print_table(visibility_rows(list(generate_scenes(24, seed=0)), (128, 96), agreement_scenes=8))


if __name__ == "__main__":
    if "--visibility" in sys.argv:
        tail = sys.argv[sys.argv.index("--visibility") + 1:]
        _visibility_report(int(tail[0]) if tail else 300)
    else:
        print_table(run(quick="--quick" in sys.argv))
