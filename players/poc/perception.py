"""Perception for `poc-neuro-symbolic`: the pixel neuro-symbolic player's network, retrained on POC renders.

The network is `players.pixel.perception.PerceptionNetwork` (per grid cell:
object-centre heatmap, sub-cell offset, attributes) with its attribute head
widened to CLEVR-POC's values (sizes small / medium / large, shapes with
cone). Training starts from the CLEVR perception of the shipped
`neuro-symbolic.pt`: every layer is copied and the attribute head's rows are
copied value by value, so only medium and cone start from nothing.

A perceived object's world position comes from its image point and perceived
size through the camera (as in the CLEVR player); its region follows from that
position (`regions_of`), so a position error near a dividing line is a region
error, which the evaluation counts as a perception error.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.scene import Scene, SceneObject
from clevr_game.vocab import ATTRIBUTES, CLEVR, CLEVR_POC
from players.pixel.images import ImageSpec, load_image
from players.pixel.perception import (
    MAX_PERCEIVED,
    STRIDE,
    PerceptionConfig,
    PerceptionMaps,
    PerceptionNetwork,
    focal_loss,
    heatmap_targets,
)
from players.pixel.projection import ground_points, image_points

POC_SIZES: tuple[int, ...] = tuple(len(CLEVR_POC.values(a)) for a in ATTRIBUTES)


class PocPerceptionNetwork(PerceptionNetwork):
    """The CLEVR perception network with an attribute head over CLEVR-POC's values."""

    def __init__(self, config: PerceptionConfig):
        super().__init__(config)
        self.attributes = nn.Conv2d(config.width, sum(POC_SIZES), 1)


def transfer_clevr_perception(network: PocPerceptionNetwork, clevr_state: dict[str, torch.Tensor]) -> None:
    """Copy a CLEVR perception's weights; attribute rows value by value (medium and cone keep their init)."""
    own = network.state_dict()
    for name, tensor in clevr_state.items():
        if name in own and not name.startswith("attributes.") and own[name].shape == tensor.shape:
            own[name] = tensor.clone()
    clevr_offsets = np.cumsum([0, *[len(CLEVR.values(a)) for a in ATTRIBUTES]])
    poc_offsets = np.cumsum([0, *POC_SIZES])
    for k, attribute in enumerate(ATTRIBUTES):
        for value in CLEVR.values(attribute):
            source = clevr_offsets[k] + CLEVR.values(attribute).index(value)
            target = poc_offsets[k] + CLEVR_POC.values(attribute).index(value)
            own["attributes.weight"][target] = clevr_state["attributes.weight"][source]
            own["attributes.bias"][target] = clevr_state["attributes.bias"][source]
    network.load_state_dict(own)


def scene_targets(scenes: Sequence[Scene], width: int, height: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Image points (B, 10, 2), CLEVR-POC attribute ids (B, 10, 4) and presence (B, 10) of each scene's objects."""
    points = np.zeros((len(scenes), MAX_PERCEIVED, 2), dtype=np.float32)
    attributes = np.zeros((len(scenes), MAX_PERCEIVED, len(ATTRIBUTES)), dtype=np.int64)
    present = np.zeros((len(scenes), MAX_PERCEIVED), dtype=bool)
    for row, scene in enumerate(scenes):
        objects = scene.objects[:MAX_PERCEIVED]
        if objects:
            points[row, : len(objects)] = image_points(scene.coords()[: len(objects)], width, height)
            attributes[row, : len(objects)] = [[CLEVR_POC.index(a, o.attribute(a)) for a in ATTRIBUTES] for o in objects]
            present[row, : len(objects)] = True
    return torch.from_numpy(points), torch.from_numpy(attributes), torch.from_numpy(present)


def perception_loss(
    maps: PerceptionMaps, points: torch.Tensor, attributes: torch.Tensor, present: torch.Tensor, sigma: float
) -> torch.Tensor:
    """Heatmap focal loss + offset L1 + attribute cross-entropy at the centre cells (as the CLEVR player)."""
    from players.pixel.perception import SceneTargets

    _, grid_height, grid_width = maps.heat.shape
    targets = SceneTargets(points, attributes, present)
    heat = heatmap_targets(targets, grid_height, grid_width, sigma)
    cells = points / STRIDE
    column, row = cells[..., 0].floor().long(), cells[..., 1].floor().long()
    inside = present & (column >= 0) & (column < grid_width) & (row >= 0) & (row < grid_height)
    batch_index, slot = inside.nonzero(as_tuple=True)
    offsets = cells[batch_index, slot] - torch.stack([column, row], dim=-1)[batch_index, slot].float()
    rows, columns = row[batch_index, slot], column[batch_index, slot]
    loss = focal_loss(maps.heat, heat, len(batch_index))
    if len(batch_index):
        loss = loss + nn.functional.l1_loss(maps.offsets[batch_index, :, rows, columns], offsets)
        logits = maps.attributes[batch_index, :, rows, columns]
        for index, part in enumerate(logits.split(POC_SIZES, dim=1)):
            loss = loss + nn.functional.cross_entropy(part, attributes[batch_index, slot, index])
    return loss


@torch.no_grad()
def perceive_scenes(network: PocPerceptionNetwork, images: np.ndarray, spec: ImageSpec) -> list[Scene]:
    """CLEVR-POC scenes of the objects found in (B, H, W, 3) uint8 images (local heatmap maxima)."""
    network.eval()
    maps = network(torch.from_numpy(np.ascontiguousarray(images)))
    probability = torch.sigmoid(maps.heat)
    peaks = probability == nn.functional.max_pool2d(probability.unsqueeze(1), 3, 1, 1)[:, 0]
    scored = torch.where(peaks & (probability > network.config.threshold), probability, torch.zeros_like(probability))
    grid_width = scored.shape[2]
    scenes = []
    for image in range(scored.shape[0]):
        values, cells = scored[image].flatten().topk(min(MAX_PERCEIVED, scored[image].numel()))
        cells = cells[values > 0]
        row, column = cells // grid_width, cells % grid_width
        offsets = maps.offsets[image, :, row, column].T.clamp(0.0, 1.0)
        points = ((torch.stack([column, row], dim=1).float() + offsets) * STRIDE).numpy().astype(np.float64)
        logits = maps.attributes[image, :, row, column].T
        ids = [part.argmax(dim=1).tolist() for part in logits.split(POC_SIZES, dim=1)]
        objects = []
        values_of = [[CLEVR_POC.values(a)[i] for i in column_ids] for a, column_ids in zip(ATTRIBUTES, ids, strict=True)]
        if len(cells):
            radii = np.array([CLEVR_POC.radius(size) for size in values_of[0]])
            coords = ground_points(points.reshape(-1, 2), radii, spec.width, spec.height)
            for k in range(len(cells)):
                attributes = {a: values_of[j][k] for j, a in enumerate(ATTRIBUTES)}
                objects.append(SceneObject(**attributes, coords=tuple(float(c) for c in coords[k])))
        scene = Scene(objects=objects, vocabulary=CLEVR_POC)
        scenes.append(scene)
    return scenes


def scene_signature(scene: Scene) -> list[tuple[str, str, str, str, int]]:
    """Sorted (size, color, material, shape, region) rows: what the solver reads of a scene."""
    from clevr_game.asp.regions import regions_of

    if not scene.objects:
        return []
    regions = regions_of(scene.coords(), scene.directions).tolist()
    return sorted((o.size, o.color, o.material, o.shape, r) for o, r in zip(scene.objects, regions, strict=True))


def images_folder(items_folder: str | os.PathLike[str], spec: ImageSpec) -> Path:
    """`<items>/cache/images/<spec>-<hash of items.json>/`: renders of each item's visible scene."""
    path = Path(items_folder) / "items.json"
    digest = hashlib.sha1(path.read_bytes()).hexdigest()[:12]
    return Path(items_folder) / "cache" / "images" / f"{spec.label}-{digest}"


def ensure_item_images(
    items_folder: str | os.PathLike[str], item_ids: Sequence[str], scenes: Sequence[Scene], spec: ImageSpec,
    *, workers: int = 2, progress: bool = False,
) -> list[Path]:
    """One PNG per item (its visible scene, rendered with `spec`), rendering those not there yet."""
    folder = images_folder(items_folder, spec)
    paths = [folder / f"{item_id.replace(':', '_')}.png" for item_id in item_ids]
    missing = [i for i, path in enumerate(paths) if not path.is_file()]
    if missing:
        from clevr_game.render import Renderer

        if progress:
            print(f"rendering {len(missing)} of {len(paths)} item images ({spec.label}) into {folder}", flush=True)
        with Renderer(spec.checked().preset, workers=workers, width=spec.width, height=spec.height) as renderer:
            renderer.render_many([scenes[i] for i in missing], folder, names=[paths[i].name for i in missing],
                                 progress=progress)
    return paths


def load_images(paths: Sequence[Path], spec: ImageSpec) -> np.ndarray:
    if not paths:
        raise InputError("no images to load")
    return np.stack([load_image(path, spec) for path in paths])
