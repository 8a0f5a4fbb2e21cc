"""What a renderer needs to know of a scene: plain, picklable object descriptions and their hash keys.

A worker process receives a `Frame`, never a Scene, so only what changes the
image crosses the pipe and goes into the cache key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from clevr_game.errors import InputError
from clevr_game.render.presets import Preset
from clevr_game.scene import Scene
from clevr_game.vocab import COLOR_RGB

SHAPES: tuple[str, ...] = ("cube", "sphere", "cylinder", "cone")
MATERIALS: tuple[str, ...] = ("rubber", "metal")

RENDERER_VERSION = 2
"""Bumped whenever the built scene changes, so old cache entries stop matching."""

_DIGITS = 6  # coordinates are floats from JSON; 1e-6 is far below a pixel


@dataclass(frozen=True)
class FrameObject:
    shape: str
    radius: float
    color: str
    material: str
    location: tuple[float, float, float]
    rotation: float
    """The scene's `rotation` value, handed to rotation_euler z as CLEVR did (degrees read as radians)."""

    @property
    def linear_rgb(self) -> tuple[float, float, float]:
        # CLEVR fed rgb / 255 straight into the shader's colour input (a linear value).
        r, g, b = COLOR_RGB[self.color]
        return (r / 255.0, g / 255.0, b / 255.0)

    def geometry(self) -> tuple[Any, ...]:
        """What decides which pixels the object covers (not its colour or material)."""
        return (self.shape, round(self.radius, _DIGITS), tuple(round(c, _DIGITS) for c in self.location),
                round(self.rotation, _DIGITS))

    def appearance(self) -> tuple[Any, ...]:
        return self.geometry() + (self.color, self.material)


Frame = tuple[FrameObject, ...]


def frame_of(scene: Scene) -> Frame:
    """The render-relevant content of `scene`; InputError names the first object the renderer cannot draw."""
    frame = []
    for i, obj in enumerate(scene.objects):
        if obj.shape not in SHAPES:
            raise InputError(f"object {i}: cannot render shape {obj.shape!r} (expected one of {', '.join(SHAPES)})")
        if obj.material not in MATERIALS:
            raise InputError(f"object {i}: cannot render material {obj.material!r} (expected one of {', '.join(MATERIALS)})")
        if obj.color not in COLOR_RGB:
            raise InputError(f"object {i}: cannot render colour {obj.color!r} (expected one of {', '.join(COLOR_RGB)})")
        try:
            radius = scene.vocabulary.radius(obj.size)
        except KeyError:
            raise InputError(f"object {i}: size {obj.size!r} is not in vocabulary {scene.vocabulary.name}") from None
        x, y, z = (float(c) for c in obj.coords)
        frame.append(FrameObject(obj.shape, float(radius), obj.color, obj.material, (x, y, z), float(obj.rotation)))
    return tuple(frame)


def _digest(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def image_key(frame: Frame, preset: Preset, assets: str | None) -> str:
    """Content address of an image: objects (in any order), preset, and the assets used."""
    # Object order does not change the picture, so sorting lets reordered scenes share a render.
    objects = sorted(obj.appearance() for obj in frame)
    return _digest({"version": RENDERER_VERSION, "preset": preset.as_dict(), "assets": assets, "objects": objects})


def coverage_key(frame: Frame, size: tuple[int, int], assets: str | None) -> str:
    """Content address of per-object pixel counts: geometry in scene order, index-pass size, assets."""
    return _digest({"version": RENDERER_VERSION, "size": list(size), "assets": assets,
                    "objects": [obj.geometry() for obj in frame]})
