"""Content-addressed image cache: a scene already rendered with the same preset is never rendered again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from clevr_game.atomic import atomic_path


def default_cache_dir() -> Path:
    """$CLEVR_GAME_RENDER_CACHE, else the user cache folder (XDG) / clevr-game / renders."""
    explicit = os.environ.get("CLEVR_GAME_RENDER_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "clevr-game" / "renders"


def copy_atomic(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Copy through a temporary file in the target's folder and a rename: readers never see half a file."""
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)


class RenderCache:
    """PNG files named by their content key, two-level fan-out (`ab/abcdef....png`)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.png"

    def get(self, key: str) -> Path | None:
        """The cached image for `key`, or None."""
        path = self.path(key)
        return path if path.is_file() else None

    def slot(self, key: str) -> Path:
        """Where a worker should write the image for `key` (folder created)."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def clear(self) -> None:
        if self.directory.is_dir():
            shutil.rmtree(self.directory)
