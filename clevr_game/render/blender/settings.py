"""Engine settings per preset, and the Cycles compute device."""

from __future__ import annotations

import bpy

from clevr_game.render.presets import CYCLES, WORKBENCH, Preset

_GPU_BACKENDS = ("OPTIX", "CUDA", "HIP", "ONEAPI", "METAL")


def _colour_management(scene: bpy.types.Scene) -> None:
    # AgX (Blender's default) washes CLEVR's saturated colours out; CLEVR used Standard.
    scene.view_settings.view_transform = "Standard"
    scene.view_settings.look = "None"
    scene.view_settings.exposure = 0.0
    scene.view_settings.gamma = 1.0


def _png_output(scene: bpy.types.Scene, width: int, height: int) -> None:
    render = scene.render
    render.resolution_x = width
    render.resolution_y = height
    render.resolution_percentage = 100
    render.image_settings.file_format = "PNG"
    render.image_settings.color_mode = "RGB"
    render.image_settings.color_depth = "8"


def apply_preset(scene: bpy.types.Scene, preset: Preset, threads: int | None) -> None:
    """Engine, resolution, samples and bounces of `preset` on the colour scene."""
    _colour_management(scene)
    _png_output(scene, preset.width, preset.height)
    render = scene.render
    render.engine = preset.engine
    if threads:
        render.threads_mode = "FIXED"
        render.threads = threads
    if preset.engine == WORKBENCH:
        shading = scene.display.shading
        shading.light = "STUDIO"
        shading.color_type = "MATERIAL"
        shading.show_shadows = True
        shading.shadow_intensity = 0.35
        shading.show_specular_highlight = True
        scene.display.render_aa = preset.workbench_aa
    elif preset.engine == CYCLES:
        cycles = scene.cycles
        cycles.samples = preset.samples
        cycles.use_adaptive_sampling = preset.adaptive_sampling
        cycles.use_denoising = preset.denoise
        if preset.denoise:
            cycles.denoiser = "OPENIMAGEDENOISE"
        cycles.max_bounces = preset.max_bounces
        cycles.diffuse_bounces = preset.diffuse_bounces
        cycles.glossy_bounces = preset.glossy_bounces
        cycles.transmission_bounces = preset.transmission_bounces
        cycles.transparent_max_bounces = preset.transparent_bounces
        cycles.blur_glossy = preset.blur_glossy
        # Keep the synced scene between frames, so moving objects does not re-export everything.
        render.use_persistent_data = True


def apply_index_pass(scene: bpy.types.Scene, width: int, height: int) -> None:
    """Flat unlit object colours, no anti-aliasing, no dither: every pixel is exactly one object's id."""
    _colour_management(scene)
    _png_output(scene, width, height)
    scene.render.engine = WORKBENCH
    scene.render.dither_intensity = 0.0
    scene.render.image_settings.compression = 0
    scene.display.render_aa = "OFF"
    shading = scene.display.shading
    shading.light = "FLAT"
    shading.color_type = "OBJECT"
    shading.show_shadows = False
    shading.show_cavity = False
    shading.show_specular_highlight = False
    shading.show_object_outline = False


def select_device(scene: bpy.types.Scene, wanted: str) -> str:
    """Use a GPU for Cycles when one is present (or required); returns what was chosen, e.g. `OPTIX NVIDIA H200`.

    Preferences are reset with the factory settings, so call this after every reset.
    """
    if scene.render.engine != CYCLES or wanted == "cpu":
        return "cpu"
    preferences = bpy.context.preferences.addons["cycles"].preferences
    for backend in _GPU_BACKENDS:
        try:
            preferences.compute_device_type = backend
        except TypeError:  # this build has no such backend
            continue
        preferences.refresh_devices()
        gpus = [d for d in preferences.devices if d.type == backend]
        if gpus:
            for device in preferences.devices:
                device.use = device.type == backend
            scene.cycles.device = "GPU"
            return f"{backend} {gpus[0].name}"
    if wanted == "gpu":
        raise RuntimeError("no GPU found for Cycles (tried " + ", ".join(_GPU_BACKENDS) + ")")
    scene.cycles.device = "CPU"
    return "cpu"
