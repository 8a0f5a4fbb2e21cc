"""CLEVR's shapes built with bmesh: unit size (radius 1, height 2), centred at the origin like CLEVR's assets."""

from __future__ import annotations

from collections.abc import Callable

import bmesh
import bpy

_CUBE_BEVEL = 0.15  # SmoothCube_v2 rounds its edges over about a tenth of its width
_CYLINDER_BEVEL = 0.05
_ROUND_SEGMENTS = 64


def _smooth_new_faces(bevelled: dict) -> None:
    # Only the bevel is smooth: flat faces stay flat so their shading has no gradient.
    for face in bevelled["faces"]:
        face.smooth = True


def _rounded_cube(bm: bmesh.types.BMesh) -> None:
    bmesh.ops.create_cube(bm, size=2.0)
    _smooth_new_faces(bmesh.ops.bevel(bm, geom=list(bm.edges) + list(bm.verts), offset=_CUBE_BEVEL,
                                      segments=4, profile=0.5, affect="EDGES"))


def _sphere(bm: bmesh.types.BMesh) -> None:
    bmesh.ops.create_uvsphere(bm, u_segments=_ROUND_SEGMENTS, v_segments=_ROUND_SEGMENTS // 2, radius=1.0)
    for face in bm.faces:
        face.smooth = True


def _cylinder(bm: bmesh.types.BMesh) -> None:
    bmesh.ops.create_cone(bm, cap_ends=True, segments=_ROUND_SEGMENTS, radius1=1.0, radius2=1.0, depth=2.0)
    for face in bm.faces:
        face.smooth = len(face.verts) == 4  # the side; the caps are n-gons
    rims = [e for e in bm.edges if any(len(f.verts) > 4 for f in e.link_faces)]
    _smooth_new_faces(bmesh.ops.bevel(bm, geom=rims, offset=_CYLINDER_BEVEL, segments=3, profile=0.5,
                                      affect="EDGES"))


def _cone(bm: bmesh.types.BMesh) -> None:
    # CLEVR-POC's cone: base radius 1, height 2, so it stands on the ground like the others.
    bmesh.ops.create_cone(bm, cap_ends=True, segments=_ROUND_SEGMENTS, radius1=1.0, radius2=0.0, depth=2.0)
    for face in bm.faces:
        face.smooth = len(face.verts) == 3


_BUILDERS: dict[str, Callable[[bmesh.types.BMesh], None]] = {
    "cube": _rounded_cube,
    "sphere": _sphere,
    "cylinder": _cylinder,
    "cone": _cone,
}


def build_shape_mesh(shape: str) -> bpy.types.Mesh:
    """A new mesh datablock for `shape` (one of frame.SHAPES)."""
    bm = bmesh.new()
    try:
        _BUILDERS[shape](bm)
        mesh = bpy.data.meshes.new(f"clevr_{shape}")
        bm.to_mesh(mesh)
    finally:
        bm.free()
    return mesh
