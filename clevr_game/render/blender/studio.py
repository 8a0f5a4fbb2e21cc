"""CLEVR's base scene built in code: camera, ground, key / fill / back area lights and a weak sun.

Light positions, sizes, colours and powers are the values stored in CLEVR's
base_scene.blend (read with bpy 5.0.1); its lamps track an empty at the origin.
"""

from __future__ import annotations

import math

import bmesh
import bpy
from mathutils import Matrix, Vector

from clevr_game.scene import CAMERA_LENS_MM, CAMERA_MATRIX_WORLD, CAMERA_SENSOR_WIDTH_MM

# name, location, size, power (W), colour
_AREA_LIGHTS = (
    ("Lamp_Key", (6.447, -2.905, 4.258), 0.5, 78.54, (1.0, 0.932, 0.817)),
    ("Lamp_Fill", (-4.671, -4.014, 3.011), 0.5, 23.56, (0.762, 0.818, 1.0)),
    ("Lamp_Back", (-1.169, 2.646, 5.816), 1.0, 39.27, (1.0, 1.0, 1.0)),
)
_SUN_ROTATION = (0.236, 0.417, 0.097)
_SUN_STRENGTH = 0.45
_SUN_ANGLE = 0.199
_GROUND_GRAY = 0.8  # Cycles' default surface, which is what CLEVR's material-less ground got
# CLEVR's ground is a photo backdrop: flat under the objects, rising in a smooth curve into
# a wall far behind them, its normal turned 2.698 rad about z. The rise is modelled as
# z = a * exp(k * d) at distance d from the origin (fitted by eye to the asset's profile).
_BACKDROP_ANGLE = 2.698
_BACKDROP_NEAR, _BACKDROP_FAR, _BACKDROP_HALF_WIDTH = -24.0, 18.1, 30.0
_BACKDROP_RISE, _BACKDROP_GROWTH = 0.00065, 0.577
_BACKDROP_STEPS = 64


def _link(scene: bpy.types.Scene, obj: bpy.types.Object) -> bpy.types.Object:
    scene.collection.objects.link(obj)
    return obj


def add_camera(scene: bpy.types.Scene) -> bpy.types.Object:
    data = bpy.data.cameras.new("Camera")
    data.lens = CAMERA_LENS_MM
    data.sensor_width = CAMERA_SENSOR_WIDTH_MM
    data.sensor_fit = "AUTO"
    camera = _link(scene, bpy.data.objects.new("Camera", data))
    # The exact matrix of CLEVR's camera, so project_to_pixels agrees with the pixels.
    camera.matrix_world = Matrix(CAMERA_MATRIX_WORLD.tolist())
    scene.camera = camera
    return camera


def _add_lights(scene: bpy.types.Scene) -> None:
    for name, location, size, power, colour in _AREA_LIGHTS:
        data = bpy.data.lights.new(name, "AREA")
        data.size = size
        data.energy = power
        data.color = colour
        lamp = _link(scene, bpy.data.objects.new(name, data))
        lamp.location = location
        # Aim at the origin, as the Track To constraint of the original lamps does.
        lamp.rotation_euler = (-Vector(location)).to_track_quat("-Z", "Y").to_euler()
    sun_data = bpy.data.lights.new("Area", "SUN")
    sun_data.energy = _SUN_STRENGTH
    sun_data.angle = _SUN_ANGLE
    sun = _link(scene, bpy.data.objects.new("Area", sun_data))
    sun.rotation_euler = _SUN_ROTATION


def _backdrop_mesh() -> bpy.types.Mesh:
    """The ground: a strip along the backdrop's normal, flat near the objects and curving up far away."""
    normal = Vector((math.cos(_BACKDROP_ANGLE), math.sin(_BACKDROP_ANGLE), 0.0))
    along = Vector((-normal.y, normal.x, 0.0))
    bm = bmesh.new()
    try:
        rows = []
        for step in range(_BACKDROP_STEPS + 1):
            # Denser steps where the curve bends (the far end), sparse on the flat floor.
            t = step / _BACKDROP_STEPS
            distance = _BACKDROP_NEAR + (_BACKDROP_FAR - _BACKDROP_NEAR) * math.sqrt(t)
            height = _BACKDROP_RISE * math.exp(_BACKDROP_GROWTH * distance)
            centre = normal * distance + Vector((0.0, 0.0, height))
            rows.append([bm.verts.new(centre + along * side * _BACKDROP_HALF_WIDTH) for side in (-1, 1)])
        for (a, b), (c, d) in zip(rows, rows[1:], strict=False):
            bm.faces.new((a, c, d, b)).smooth = True  # counter-clockwise from above: normals face up
        mesh = bpy.data.meshes.new("Ground")
        bm.to_mesh(mesh)
    finally:
        bm.free()
    return mesh


def _add_ground(scene: bpy.types.Scene) -> None:
    mesh = _backdrop_mesh()
    material = bpy.data.materials.new("Ground")
    bsdf = next(n for n in material.node_tree.nodes if n.bl_idname == "ShaderNodeBsdfPrincipled")
    bsdf.inputs["Base Color"].default_value = (_GROUND_GRAY, _GROUND_GRAY, _GROUND_GRAY, 1.0)
    bsdf.inputs["Roughness"].default_value = 1.0
    bsdf.inputs["Specular IOR Level"].default_value = 0.0
    material.diffuse_color = (_GROUND_GRAY, _GROUND_GRAY, _GROUND_GRAY, 1.0)
    mesh.materials.append(material)
    _link(scene, bpy.data.objects.new("Ground", mesh))


def _set_world(scene: bpy.types.Scene) -> None:
    # CLEVR's world has strength 0: all light comes from the lamps.
    world = bpy.data.worlds.new("World")
    world.color = (0.0, 0.0, 0.0)
    background = next(n for n in world.node_tree.nodes if n.bl_idname == "ShaderNodeBackground")
    background.inputs["Color"].default_value = (0.0, 0.0, 0.0, 1.0)
    background.inputs["Strength"].default_value = 0.0
    scene.world = world


def build_studio(scene: bpy.types.Scene) -> bpy.types.Object:
    """Fill an empty scene with CLEVR's camera, lights, ground and world; returns the camera."""
    camera = add_camera(scene)
    _add_lights(scene)
    _add_ground(scene)
    _set_world(scene)
    return camera
