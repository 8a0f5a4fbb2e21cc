"""A Blender scene kept alive between frames: objects are moved, rescaled and recoloured in place.

Two scenes share one collection of shape objects: the colour scene (camera,
lights, ground, the preset's engine) and an index scene (Workbench, flat
colours) whose pixels say which object they belong to.
"""

from __future__ import annotations

import os

import bpy
import numpy as np

from clevr_game.render.blender.clevr_assets import open_clevr_assets
from clevr_game.render.blender.geometry import build_shape_mesh
from clevr_game.render.blender.materials import MaterialLibrary, asset_shader
from clevr_game.render.blender.settings import apply_index_pass, apply_preset, select_device
from clevr_game.render.blender.studio import build_studio
from clevr_game.render.frame import SHAPES, Frame
from clevr_game.render.worker_config import WorkerConfig

# Object ids are written in sRGB steps of 17 in red (ones) and green (fifteens): far
# apart enough to decode exactly, room for 224 objects.
_ID_STEP = 17
_ID_BASE = 15


def _srgb_to_linear(byte: int) -> float:
    value = byte / 255.0
    return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4


def id_colour(index: int) -> tuple[float, float, float, float]:
    """The flat colour of the object at `index` in the index pass (0 stays black: background)."""
    code = index + 1
    return (_srgb_to_linear(code % _ID_BASE * _ID_STEP), _srgb_to_linear(code // _ID_BASE * _ID_STEP), 0.0, 1.0)


def decode_ids(rgb_bytes: np.ndarray) -> np.ndarray:
    """(..., >=2) 8-bit pixels of the index pass -> object code (0 background, i + 1 object i)."""
    red = np.rint(rgb_bytes[..., 0] / _ID_STEP).astype(np.int64)
    green = np.rint(rgb_bytes[..., 1] / _ID_STEP).astype(np.int64)
    return red + _ID_BASE * green


class Stage:
    def __init__(self, config: WorkerConfig):
        self.config = config
        self.device = "cpu"
        self.build()

    # ------------------------------------------------------------------ building

    def build(self) -> None:
        """(Re)build everything from an empty Blender: the cost a fresh start per frame would pay."""
        config = self.config
        bpy.ops.wm.read_factory_settings(use_empty=True)
        if config.assets_dir is not None:
            self.scene, self._meshes, groups = open_clevr_assets(config.assets_dir)
            self.camera = self.scene.camera
            self._materials = MaterialLibrary(asset_shader(groups))
        else:
            self.scene = bpy.data.scenes[0]
            self.camera = build_studio(self.scene)
            self._meshes = {}
            self._materials = MaterialLibrary()
        self.scene.name = "Colour"
        self._shapes = bpy.data.collections.new("Shapes")
        self.scene.collection.children.link(self._shapes)
        self._index_scene = self._make_index_scene()
        apply_preset(self.scene, config.preset, config.threads)
        self.device = select_device(self.scene, config.device)
        self._pool: dict[str, list[bpy.types.Object]] = {shape: [] for shape in SHAPES}
        self._shown: Frame | None = None

    def _make_index_scene(self) -> bpy.types.Scene:
        scene = bpy.data.scenes.new("ObjectIndex")
        scene.collection.objects.link(self.camera)
        scene.camera = self.camera
        scene.collection.children.link(self._shapes)
        world = bpy.data.worlds.new("IndexBackground")
        world.color = (0.0, 0.0, 0.0)
        scene.world = world
        apply_index_pass(scene, *self.config.index_size)
        return scene

    def _mesh(self, shape: str) -> bpy.types.Mesh:
        mesh = self._meshes.get(shape)
        if mesh is None:
            mesh = self._meshes[shape] = build_shape_mesh(shape)
        if not mesh.materials:
            mesh.materials.append(None)  # one slot, filled per object (slot linked to the object)
        return mesh

    def _new_object(self, shape: str) -> bpy.types.Object:
        obj = bpy.data.objects.new(f"{shape}_{len(self._pool[shape])}", self._mesh(shape))
        self._shapes.objects.link(obj)
        obj.material_slots[0].link = "OBJECT"
        return obj

    # ------------------------------------------------------------------ frames

    def show(self, frame: Frame) -> None:
        """Place `frame`'s objects, reusing the objects of earlier frames; spare ones are hidden."""
        if frame == self._shown:
            return
        used = dict.fromkeys(SHAPES, 0)
        for index, item in enumerate(frame):
            pool = self._pool[item.shape]
            if used[item.shape] == len(pool):
                pool.append(self._new_object(item.shape))
            obj = pool[used[item.shape]]
            used[item.shape] += 1
            # CLEVR scaled unit shapes by the radius and handed the rotation in degrees to a
            # radians field; doing the same keeps these images comparable with CLEVR's.
            obj.location = item.location
            obj.rotation_euler = (0.0, 0.0, item.rotation)
            obj.scale = (item.radius, item.radius, item.radius)
            material = self._materials.get(item.material, item.linear_rgb)
            if obj.material_slots[0].material != material:
                obj.material_slots[0].material = material
            obj.color = id_colour(index)
            obj.hide_render = False
        for shape, pool in self._pool.items():
            for obj in pool[used[shape]:]:
                obj.hide_render = True
        self._shown = frame

    def render(self, frame: Frame, path: str) -> None:
        """Render `frame` with the preset to the PNG `path`, written atomically."""
        self.show(frame)
        self._render_scene(self.scene, path)

    def coverage(self, frame: Frame) -> list[int]:
        """Visible pixels per object of `frame` in the index pass."""
        self.show(frame)
        path = os.path.join(bpy.app.tempdir or "/tmp", f"clevr_index_{os.getpid()}.png")
        self._render_scene(self._index_scene, path)
        try:
            image = bpy.data.images.load(path, check_existing=False)
            try:
                width, height = image.size
                pixels = np.empty(width * height * image.channels, dtype=np.float32)
                image.pixels.foreach_get(pixels)
                channels = image.channels
            finally:
                bpy.data.images.remove(image)
        finally:
            os.unlink(path)
        rgb = np.rint(pixels.reshape(-1, channels)[:, :2] * 255.0)
        counts = np.bincount(decode_ids(rgb).ravel(), minlength=len(frame) + 1)
        return [int(c) for c in counts[1:len(frame) + 1]]

    def _render_scene(self, scene: bpy.types.Scene, path: str) -> None:
        directory, name = os.path.split(os.path.abspath(path))
        tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp.png")
        scene.render.filepath = tmp
        scene.render.use_file_extension = False
        try:
            bpy.ops.render.render(write_still=True, scene=scene.name)
            if not os.path.isfile(tmp):
                raise RuntimeError(f"Blender wrote no image for {name}")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
