"""`clevr-game render`: a scenes file to CLEVR-named PNGs, plus the scenes with their pixel_coords.

Only argparse at import time: the renderer is imported when the command runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from clevr_game.cli_types import (
    MAX_BLENDER_WORKERS,
    MAX_IMAGE_SIDE,
    MAX_ITEMS,
    MAX_SECONDS,
    float_in,
    int_in,
    output_file,
    output_folder,
)

if TYPE_CHECKING:
    from clevr_game.render.presets import Preset
    from clevr_game.scene import Scene


def check_render_inputs(
    scenes_path: str, preset_name: str, width: int | None = None, height: int | None = None
) -> tuple[list[Scene], Preset, list[str]]:
    """Scenes, preset and image names, every input checked before a Blender process starts."""
    from clevr_game.render.naming import image_names
    from clevr_game.render.presets import get_preset
    from clevr_game.scene import load_scenes

    scenes = load_scenes(scenes_path)
    preset = get_preset(preset_name, width, height)
    return scenes, preset, image_names(scenes, source=Path(scenes_path).name)


def _cmd_render(args: argparse.Namespace) -> int:
    import numpy as np

    from clevr_game.render.renderer import Renderer
    from clevr_game.scene import load_scenes_info, project_to_pixels, save_scenes

    scenes, preset, names = check_render_inputs(args.scenes, args.preset, args.width, args.height)
    # Named before the cut, so an image keeps the name a full render gives it.
    scenes, names = scenes[:args.limit], names[:args.limit]
    out = Path(args.out)

    def report(line: str) -> None:
        print(f"clevr-game: warning: {line}", file=sys.stderr)

    start = time.perf_counter()
    with Renderer(preset, workers=args.workers, cache_dir=args.cache_dir, use_cache=not args.no_cache,
                  clevr_assets=args.clevr_assets, device=args.device, job_timeout=args.timeout,
                  report=report) as renderer:
        renderer.render_many(scenes, out, names=names, progress=not args.no_progress)
        stats = renderer.stats
    elapsed = time.perf_counter() - start
    # pixel_coords from the exact camera, at the size of the images just written.
    for scene, name in zip(scenes, names, strict=True):
        scene.image_filename = name
        if scene.objects:
            pixels = project_to_pixels(scene.coords(), preset.width, preset.height)
            for obj, (x, y, depth) in zip(scene.objects, pixels.tolist(), strict=True):
                obj.pixel_coords = (int(x), int(y), float(depth))
    scenes_out = Path(args.scenes_out) if args.scenes_out else out / "scenes.json"
    save_scenes(scenes_out, scenes, load_scenes_info(args.scenes))
    rate = len(scenes) / elapsed if elapsed > 0 else float(np.inf)
    print(f"rendered {len(scenes)} images to {out} ({stats.rendered} rendered, {stats.cache_hits} from cache) "
          f"in {elapsed:.1f} s ({rate:.2f} img/s); scenes with pixel_coords: {scenes_out}")
    return 0


def add_render_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register `render` on the clevr-game command line."""
    p = subparsers.add_parser("render", help="render a scenes file to CLEVR-named PNG images with Blender")
    p.add_argument("--scenes", required=True, help="a CLEVR scenes JSON file")
    p.add_argument("--out", type=output_folder, required=True, help="folder for the images")
    p.add_argument("--preset", default="balanced", choices=["fast", "balanced", "clevr"],
                   help="fast: Workbench; balanced: Cycles 16 samples + denoise; clevr: Cycles 512 samples, 480x320")
    p.add_argument("--limit", type=int_in(1, MAX_ITEMS), default=None,
                   help="render the first N scenes only (OUT/scenes.json then holds those N)")
    p.add_argument("--workers", type=int_in(1, MAX_BLENDER_WORKERS), default=1,
                   help="persistent Blender processes rendering in parallel")
    p.add_argument("--width", type=int_in(1, MAX_IMAGE_SIDE), default=None, help="override the preset's image width")
    p.add_argument("--height", type=int_in(1, MAX_IMAGE_SIDE), default=None, help="override the preset's image height")
    p.add_argument("--clevr-assets", default=None,
                   help="`clevr` (the original assets shipped in the package) or a folder with CLEVR's base_scene.blend, "
                        "shapes/ and materials/ (default: the scene built in code)")
    p.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto", help="Cycles compute device")
    p.add_argument("--cache-dir", type=output_folder, default=None,
                   help="image cache folder (default ~/.cache/clevr-game/renders)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor fill the image cache")
    p.add_argument("--timeout", type=float_in(0, MAX_SECONDS, above_lo=True), default=None,
                   help="seconds before a stuck image's worker is restarted")
    p.add_argument("--scenes-out", type=output_file, default=None,
                   help="where to write the scenes with pixel_coords (default OUT/scenes.json)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_cmd_render)
