"""Image file names as CLEVR writes them: CLEVR_<split>_<index, six digits>.png."""

from __future__ import annotations

from collections.abc import Sequence

from clevr_game.errors import InputError, located
from clevr_game.scene import Scene


def image_name(scene: Scene, position: int, prefix: str = "CLEVR", source: str | None = None) -> str:
    """The scene's own image_filename, else CLEVR's pattern from its split and image_index (or position).

    `source` (the scenes file) prefixes error messages.
    """
    if scene.image_filename:
        name = scene.image_filename
        if "/" in name or "\\" in name or name.startswith("."):
            raise InputError(
                f"{located(source, f'scene {position}')}: image_filename {name!r} must be a plain file name"
            )
        return name
    index = scene.image_index if scene.image_index is not None else position
    return f"{prefix}_{scene.split or 'new'}_{index:06d}.png"


def image_names(scenes: Sequence[Scene], prefix: str = "CLEVR", source: str | None = None) -> list[str]:
    """One name per scene; InputError (prefixed with `source`) when two scenes would write the same file."""
    names = [image_name(scene, i, prefix, source) for i, scene in enumerate(scenes)]
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise InputError(f"{located(source, f'scenes {seen[name]} and {i}')}: both name their image {name!r}")
        seen[name] = i
    return names
