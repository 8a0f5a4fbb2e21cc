"""Blender (bpy) renderer of CLEVR scenes: presets, persistent workers, content-addressed cache.

Importing this package does not import bpy: Blender lives only in the worker
processes that a Renderer spawns.
"""

from clevr_game.render.cache import RenderCache, default_cache_dir
from clevr_game.render.pool import RenderJobError, RenderWorkerError
from clevr_game.render.presets import PRESETS, Preset, get_preset
from clevr_game.render.renderer import CLEVR_MIN_PIXELS, Renderer, read_png

__all__ = [
    "CLEVR_MIN_PIXELS",
    "PRESETS",
    "Preset",
    "RenderCache",
    "RenderJobError",
    "RenderWorkerError",
    "Renderer",
    "default_cache_dir",
    "get_preset",
    "read_png",
]
