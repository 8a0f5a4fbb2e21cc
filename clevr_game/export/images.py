"""Images of the exported scenes, through the Blender renderer (imported only when asked for)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from clevr_game.errors import InputError
from clevr_game.scene import IMAGE_HEIGHT, IMAGE_WIDTH, Scene

IMAGES_DIR = "images"


def image_size(preset: str | None) -> tuple[int, int]:
    """(width, height) of the images: the preset's, or CLEVR's 480 x 320 when nothing is rendered."""
    if preset is None:
        return IMAGE_WIDTH, IMAGE_HEIGHT
    try:
        from clevr_game.render.presets import get_preset
    except ImportError as exc:
        raise InputError(f"--render {preset}: the renderer is unavailable ({exc}); export without --render") from None
    chosen = get_preset(preset)
    return chosen.width, chosen.height


def remove_stale_images(folder: Path, split: str, keep: set[str]) -> int:
    """Delete this split's CLEVR-named images an earlier export left that the new one does not have."""
    if not folder.is_dir():
        return 0
    pattern = re.compile(rf"CLEVR_{re.escape(split)}_\d{{6}}\.png")
    stale = [p for p in folder.iterdir() if pattern.fullmatch(p.name) and p.name not in keep]
    for path in stale:
        path.unlink()
    return len(stale)


def render_images(
    scenes: Sequence[Scene],
    names: Sequence[str],
    folder: Path,
    preset: str,
    *,
    workers: int = 1,
    progress: bool = False,
    report: Callable[[str], None] | None = None,
) -> None:
    """Render every scene to `folder/<name>`; `report` hears of restarted render workers."""
    try:
        from clevr_game.render import Renderer
    except ImportError as exc:
        raise InputError(f"--render {preset}: the renderer is unavailable ({exc}); export without --render") from None

    with Renderer(preset, workers=workers, report=report) as renderer:
        renderer.render_many(scenes, folder, names=names, progress=progress)
