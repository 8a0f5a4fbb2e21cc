"""The original CLEVR .blend assets (optional): where they are and a fingerprint for the cache key.

Layout as in CLEVR's image_generation/data: base_scene.blend, shapes/<Name>.blend,
materials/<Name>.blend. Checked here, before any worker starts, so a wrong
folder is one clear error instead of a failed worker.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from clevr_game.errors import InputError

BASE_SCENE = "base_scene.blend"
SHAPE_FILES: dict[str, str] = {"cube": "SmoothCube_v2", "sphere": "Sphere", "cylinder": "SmoothCylinder"}
"""Shape -> object (and file) name; the cone of CLEVR-POC has no asset and is built in code."""
SHIPPED_ASSETS = "clevr"
"""The `--clevr-assets` value naming the copy shipped in the package (clevr_game/data/clevr_1.0/blend)."""
MATERIAL_FILES: dict[str, str] = {"rubber": "Rubber", "metal": "MyMetal"}
"""Material -> node group (and file) name; each group has a Color input and a Shader output."""


def asset_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Every file the renderer reads from `directory`; InputError names the first missing one."""
    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"--clevr-assets {root}: no such folder")
    files = [root / BASE_SCENE]
    files += [root / "shapes" / f"{name}.blend" for name in SHAPE_FILES.values()]
    files += [root / "materials" / f"{name}.blend" for name in MATERIAL_FILES.values()]
    for path in files:
        if not path.is_file():
            raise InputError(f"--clevr-assets {root}: missing {path.relative_to(root)}")
    return files


def assets_fingerprint(directory: str | os.PathLike[str] | None) -> str | None:
    """A hash of the asset files' bytes (None for the scene built in code), for cache keys."""
    if directory is None:
        return None
    digest = hashlib.sha256()
    for path in asset_files(directory):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return "clevr-assets:" + digest.hexdigest()[:16]
