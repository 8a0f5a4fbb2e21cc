"""What a render worker is started with; apart from the worker so that its Blender stage can read it."""

from __future__ import annotations

from dataclasses import dataclass

from clevr_game.render.presets import Preset


@dataclass(frozen=True)
class WorkerConfig:
    """How a worker builds its Blender scene (picklable: it crosses to the spawned process)."""

    preset: Preset
    assets_dir: str | None
    index_size: tuple[int, int]
    device: str = "auto"
    threads: int | None = None
    log_path: str | None = None
