"""Render presets: engine, resolution, samples and light bounces, from quick previews to CLEVR's own settings."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from clevr_game.errors import InputError

WORKBENCH = "BLENDER_WORKBENCH"
CYCLES = "CYCLES"


@dataclass(frozen=True)
class Preset:
    """Everything about a render that is not the scene itself (so it is part of the cache key)."""

    name: str
    engine: str
    width: int
    height: int
    samples: int = 1
    adaptive_sampling: bool = False
    denoise: bool = False
    max_bounces: int = 4
    diffuse_bounces: int = 2
    glossy_bounces: int = 2
    transmission_bounces: int = 2
    transparent_bounces: int = 4
    blur_glossy: float = 0.0
    workbench_aa: str = "FXAA"

    def sized(self, width: int | None = None, height: int | None = None) -> Preset:
        """The same preset at another resolution (CLEVR's camera keeps its horizontal field of view)."""
        width = self.width if width is None else width
        height = self.height if height is None else height
        if width < 1 or height < 1:
            raise InputError(f"image size must be positive, got {width}x{height}")
        if height > width:
            # The camera fits the sensor horizontally; a portrait frame would change the view.
            raise InputError(f"image height {height} exceeds width {width}; CLEVR's camera needs width >= height")
        return replace(self, width=width, height=height)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


PRESETS: dict[str, Preset] = {
    # Workbench rasterises with software OpenGL here: no path tracing, studio lighting.
    "fast": Preset("fast", WORKBENCH, 320, 240),
    "balanced": Preset("balanced", CYCLES, 320, 240, samples=16, denoise=True),
    # CLEVR rendered 512 samples with the base scene's bounces (12 in all, 4 diffuse and
    # glossy) and 8 transparent bounces, glossy blur 2.0.
    "clevr": Preset(
        "clevr", CYCLES, 480, 320, samples=512, adaptive_sampling=True,
        max_bounces=12, diffuse_bounces=4, glossy_bounces=4, transmission_bounces=12,
        transparent_bounces=8, blur_glossy=2.0,
    ),
}


def get_preset(name: str, width: int | None = None, height: int | None = None) -> Preset:
    """A named preset, optionally at another resolution; InputError names the unknown preset."""
    try:
        preset = PRESETS[name]
    except KeyError:
        raise InputError(f"unknown render preset {name!r} (expected one of {', '.join(PRESETS)})") from None
    return preset.sized(width, height)
