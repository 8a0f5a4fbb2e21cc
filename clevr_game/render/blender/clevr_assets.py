"""Open CLEVR's base scene and append its shape meshes and material node groups."""

from __future__ import annotations

from pathlib import Path

import bpy

from clevr_game.render.assets import BASE_SCENE, MATERIAL_FILES, SHAPE_FILES


def _append(path: Path, kind: str, name: str) -> bpy.types.ID:
    with bpy.data.libraries.load(str(path)) as (source, target):
        if name not in getattr(source, kind):
            raise RuntimeError(f"{path} holds no {kind[:-1]} named {name!r}")
        setattr(target, kind, [name])
    return getattr(target, kind)[0]


def open_clevr_assets(directory: str) -> tuple[bpy.types.Scene, dict[str, bpy.types.Mesh], dict[str, bpy.types.NodeTree]]:
    """Load the base scene as the current file; returns it with shape meshes and node groups by CLEVR name."""
    root = Path(directory)
    bpy.ops.wm.open_mainfile(filepath=str(root / BASE_SCENE), load_ui=False)
    scene = bpy.data.scenes[0]
    meshes = {}
    for shape, name in SHAPE_FILES.items():
        obj = _append(root / "shapes" / f"{name}.blend", "objects", name)
        meshes[shape] = obj.data
        bpy.data.objects.remove(obj)  # only the mesh is used; objects are made per scene object
    groups = {kind: _append(root / "materials" / f"{name}.blend", "node_groups", name)
              for kind, name in MATERIAL_FILES.items()}
    return scene, meshes, groups
