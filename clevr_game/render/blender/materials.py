"""Rubber and metal materials per CLEVR colour, for Cycles (nodes) and Workbench (viewport values).

One material per (material, colour) pair, shared by every object that wears
it: recolouring an object swaps its material slot and never recompiles a shader.
"""

from __future__ import annotations

from collections.abc import Callable

import bpy

RGB = tuple[float, float, float]

# Workbench's studio lighting reads these viewport values instead of the node tree.
_VIEWPORT = {"rubber": (0.0, 0.8), "metal": (0.4, 0.3)}  # (metallic, roughness)


def _principled(material: bpy.types.Material) -> bpy.types.Node:
    nodes = material.node_tree.nodes
    for node in nodes:
        if node.bl_idname == "ShaderNodeBsdfPrincipled":
            return node
    node = nodes.new("ShaderNodeBsdfPrincipled")
    output = next(n for n in nodes if n.bl_idname == "ShaderNodeOutputMaterial")
    material.node_tree.links.new(node.outputs["BSDF"], output.inputs["Surface"])
    return node


def _code_shader(material: bpy.types.Material, kind: str, rgb: RGB) -> None:
    """A Principled BSDF tuned by eye against CLEVR's renders: matte rubber, polished metal."""
    bsdf = _principled(material)
    bsdf.inputs["Base Color"].default_value = (*rgb, 1.0)
    if kind == "metal":
        bsdf.inputs["Metallic"].default_value = 1.0
        bsdf.inputs["Roughness"].default_value = 0.3
        bsdf.inputs["Anisotropic"].default_value = 0.25
    else:
        bsdf.inputs["Metallic"].default_value = 0.0
        bsdf.inputs["Roughness"].default_value = 0.75
        bsdf.inputs["Specular IOR Level"].default_value = 0.25
        bsdf.inputs["Sheen Weight"].default_value = 0.1


def asset_shader(groups: dict[str, bpy.types.NodeTree]) -> Callable[[bpy.types.Material, str, RGB], None]:
    """Shader builder that wires CLEVR's own node groups (Rubber, MyMetal) with their Color input set."""

    def build(material: bpy.types.Material, kind: str, rgb: RGB) -> None:
        tree = material.node_tree
        for node in list(tree.nodes):
            if node.bl_idname != "ShaderNodeOutputMaterial":
                tree.nodes.remove(node)
        output = next(n for n in tree.nodes if n.bl_idname == "ShaderNodeOutputMaterial")
        group = tree.nodes.new("ShaderNodeGroup")
        group.node_tree = groups[kind]
        group.inputs["Color"].default_value = (*rgb, 1.0)
        tree.links.new(group.outputs["Shader"], output.inputs["Surface"])

    return build


class MaterialLibrary:
    """Creates each (material, colour) material on first use and hands out the same one afterwards."""

    def __init__(self, build_shader: Callable[[bpy.types.Material, str, RGB], None] = _code_shader):
        self._build_shader = build_shader
        self._materials: dict[tuple[str, RGB], bpy.types.Material] = {}

    def get(self, kind: str, rgb: RGB) -> bpy.types.Material:
        key = (kind, rgb)
        material = self._materials.get(key)
        if material is None:
            material = bpy.data.materials.new(f"clevr_{kind}_{len(self._materials)}")
            self._build_shader(material, kind, rgb)
            metallic, roughness = _VIEWPORT[kind]
            material.diffuse_color = (*rgb, 1.0)
            material.metallic = metallic
            material.roughness = roughness
            self._materials[key] = material
        return material
