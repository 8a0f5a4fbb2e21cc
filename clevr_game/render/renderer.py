"""The renderer: scenes in, PNG files or arrays out, through persistent workers and the image cache."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.errors import InputError
from clevr_game.render.assets import SHIPPED_ASSETS, assets_fingerprint
from clevr_game.render.cache import RenderCache, copy_atomic
from clevr_game.render.frame import Frame, coverage_key, frame_of, image_key
from clevr_game.render.naming import image_names
from clevr_game.render.pool import Job, WorkerPool, threads_per_worker
from clevr_game.render.presets import Preset, get_preset
from clevr_game.render.worker import WorkerConfig
from clevr_game.scene import Scene

DEVICES = ("auto", "cpu", "gpu")
CLEVR_MIN_PIXELS = 200
"""CLEVR's minimum visible pixels per object, at its 320 x 240 render size."""
CLEVR_INDEX_SIZE = (320, 240)
_COVERAGE_MEMORY = 100_000


@dataclass
class RenderStats:
    rendered: int = 0
    cache_hits: int = 0
    coverage_rendered: int = 0
    coverage_hits: int = 0


def read_png(path: str | os.PathLike[str]) -> np.ndarray:
    """(H, W, 3) uint8 pixels of a PNG."""
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8).copy()


class Renderer:
    """Blender renders of CLEVR scenes with one preset, on `workers` persistent processes.

    Use as a context manager (or call close()) so the workers end with it.
    `hidden_objects` is the visibility hook of the game's boundary enforcer.
    """

    def __init__(
        self,
        preset: str | Preset = "fast",
        *,
        workers: int = 1,
        width: int | None = None,
        height: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        clevr_assets: str | os.PathLike[str] | None = None,
        device: str = "auto",
        index_size: tuple[int, int] = CLEVR_INDEX_SIZE,
        min_pixels: int = CLEVR_MIN_PIXELS,
        job_timeout: float | None = None,
        retries: int = 1,
        report: Callable[[str], None] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
    ):
        self.preset = preset.sized(width, height) if isinstance(preset, Preset) else get_preset(preset, width, height)
        if workers < 1:
            raise InputError(f"workers must be at least 1, got {workers}")
        if device not in DEVICES:
            raise InputError(f"unknown device {device!r} (expected one of {', '.join(DEVICES)})")
        if len(index_size) != 2 or min(index_size) < 1:
            raise InputError(f"index_size must be two positive integers, got {index_size!r}")
        if clevr_assets is not None and str(clevr_assets) == SHIPPED_ASSETS:
            from clevr_game.datafiles import CLEVR_ASSETS_DIR

            clevr_assets = CLEVR_ASSETS_DIR
        self.assets_dir = str(Path(clevr_assets).resolve()) if clevr_assets is not None else None
        self._assets_id = assets_fingerprint(self.assets_dir)  # also checks the folder
        self.device = device
        self.index_size = (int(index_size[0]), int(index_size[1]))
        self.min_pixels = min_pixels
        self.cache = RenderCache(cache_dir) if use_cache else None
        self.log_dir = str(log_dir) if log_dir is not None else None
        self.stats = RenderStats()
        self._coverage: OrderedDict[str, list[int]] = OrderedDict()
        self._scratch = tempfile.mkdtemp(prefix="clevr-render-")
        # The pool gets a factory that does not hold this Renderer, so the finalizer below can run.
        config_for = functools.partial(_worker_config, self.preset, self.assets_dir, self.index_size, device,
                                       self.log_dir)
        self._pool = WorkerPool(config_for, workers, job_timeout=job_timeout, retries=retries, report=report)
        # Workers end even when a caller forgets close(): at garbage collection or interpreter exit.
        self._finalizer = weakref.finalize(self, _shut_down, self._pool, self._scratch)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """End the workers and remove scratch files (the cache stays)."""
        self._finalizer()

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def workers(self) -> int:
        return len(self._pool.workers)

    @property
    def restarts(self) -> int:
        return self._pool.restarts

    def worker_pids(self) -> list[int | None]:
        """Process ids of the workers (None for a slot not started yet)."""
        return self._pool.pids()

    def worker_devices(self) -> list[str | None]:
        """What each started worker renders on (`cpu`, `OPTIX <gpu name>`, ...)."""
        return [w.device if w.running else None for w in self._pool.workers]

    def start(self) -> None:
        """Start every worker now rather than on first use (for timing without the start-up)."""
        self._pool.run([Job(("ping",), "starting") for _ in self._pool.workers])

    # ------------------------------------------------------------------ images

    def image_key(self, scene: Scene) -> str:
        return image_key(frame_of(scene), self.preset, self._assets_id)

    def render(self, scene: Scene, path: str | os.PathLike[str]) -> Path:
        """Render `scene` to the PNG `path` (from the cache when it was rendered before)."""
        path = Path(path)
        self._produce([(frame_of(scene), [path])])
        return path

    def render_array(self, scene: Scene) -> np.ndarray:
        """(H, W, 3) uint8 image of `scene` (what the env's rgb_array render returns)."""
        frame = frame_of(scene)
        if self.cache is not None:
            key = image_key(frame, self.preset, self._assets_id)
            if self.cache.get(key) is None:
                self._produce([(frame, [])])
            return read_png(self.cache.path(key))
        scratch = Path(self._scratch) / f"array_{os.getpid()}.png"
        self._produce([(frame, [scratch])])
        try:
            return read_png(scratch)
        finally:
            scratch.unlink(missing_ok=True)

    def render_many(
        self,
        scenes: Sequence[Scene],
        out_dir: str | os.PathLike[str],
        *,
        names: Sequence[str] | None = None,
        workers: int | None = None,
        progress: bool = False,
    ) -> list[Path]:
        """Render every scene into `out_dir` (CLEVR names unless `names` given), spread over the workers."""
        names = list(names) if names is not None else image_names(scenes)
        if len(names) != len(scenes):
            raise InputError(f"{len(names)} names for {len(scenes)} scenes")
        if workers is not None:
            if workers < 1:
                raise InputError(f"workers must be at least 1, got {workers}")
            if workers != self.workers:
                self._pool.resize(workers)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / name for name in names]
        self._produce([(frame_of(s), [p]) for s, p in zip(scenes, paths, strict=True)], progress=progress)
        return paths

    def _produce(self, requests: list[tuple[Frame, list[Path]]], progress: bool = False) -> None:
        """Write each frame's image to its targets: cache hits are copied, the rest rendered once per key."""
        targets: dict[str, list[Path]] = {}
        frames: dict[str, Frame] = {}
        for frame, paths in requests:
            key = image_key(frame, self.preset, self._assets_id)
            frames.setdefault(key, frame)
            targets.setdefault(key, []).extend(paths)
        bar = _progress_bar(sum(max(1, len(p)) for p in targets.values()), progress)
        jobs = []
        try:
            for key, paths in targets.items():
                cached = self.cache.get(key) if self.cache is not None else None
                if cached is not None:
                    for path in paths:
                        copy_atomic(cached, path)
                    self.stats.cache_hits += 1
                    bar.update(max(1, len(paths)))
                    continue
                # Render into the cache when there is one, else straight to the first target.
                first = self.cache.slot(key) if self.cache is not None else paths[0]
                copies = paths if self.cache is not None else paths[1:]
                if self.cache is None:
                    first.parent.mkdir(parents=True, exist_ok=True)
                jobs.append(Job(("render", frames[key], str(first), False), f"rendering {_label(paths, key)}",
                                self._delivered(first, copies, bar)))
            self._pool.run(jobs)
        finally:
            bar.close()

    def _delivered(self, rendered: Path, copies: list[Path], bar: Any) -> Callable[[Any], None]:
        def done(_: Any) -> None:
            for path in copies:
                copy_atomic(rendered, path)
            self.stats.rendered += 1
            bar.update(max(1, len(copies) + (self.cache is None)))

        return done

    # ------------------------------------------------------------------ visibility

    def visible_pixels(self, scene: Scene) -> list[int]:
        """Visible pixels per object of `scene` in an object-index render at `index_size`."""
        return self.visible_pixels_many([scene])[0]

    def visible_pixels_many(self, scenes: Sequence[Scene]) -> list[list[int]]:
        frames = [frame_of(s) for s in scenes]
        keys = [coverage_key(f, self.index_size, self._assets_id) for f in frames]
        jobs: dict[str, Job] = {}
        for key, frame in zip(keys, frames, strict=True):
            if key in self._coverage:
                self._coverage.move_to_end(key)
                self.stats.coverage_hits += 1
            elif frame and key not in jobs:
                jobs[key] = Job(("coverage", frame), "counting visible pixels", self._remembered(key))
        self._pool.run(list(jobs.values()))
        return [list(self._coverage[k]) if f else [] for k, f in zip(keys, frames, strict=True)]

    def _remembered(self, key: str) -> Callable[[list[int]], None]:
        def done(counts: list[int]) -> None:
            self.stats.coverage_rendered += 1
            self._coverage[key] = counts
            if len(self._coverage) > _COVERAGE_MEMORY:
                self._coverage.popitem(last=False)

        return done

    @property
    def pixel_threshold(self) -> float:
        """`min_pixels` (counted at CLEVR's 320 x 240) scaled to the index-pass size."""
        width, height = self.index_size
        return self.min_pixels * (width * height) / (CLEVR_INDEX_SIZE[0] * CLEVR_INDEX_SIZE[1])

    def hidden_objects(self, scene: Scene) -> list[int]:
        """Indices of objects with too few visible pixels (the boundary enforcer's visibility hook)."""
        threshold = self.pixel_threshold
        return [i for i, count in enumerate(self.visible_pixels(scene)) if count < threshold]


def _worker_config(preset: Preset, assets_dir: str | None, index_size: tuple[int, int], device: str,
                   log_dir: str | None, slot: int, size: int) -> WorkerConfig:
    log = os.path.join(log_dir, f"worker-{slot}.log") if log_dir else None
    return WorkerConfig(preset, assets_dir, index_size, device, threads_per_worker(size), log)


def _shut_down(pool: WorkerPool, scratch: str) -> None:
    pool.close()
    shutil.rmtree(scratch, ignore_errors=True)


def _label(paths: list[Path], key: str) -> str:
    return paths[0].name if paths else f"image {key[:12]}"


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="img", desc="render")
