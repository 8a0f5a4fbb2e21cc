"""Perception of the neuro-symbolic player: objects, their attributes and positions from pixels.

A small CNN maps the image to a grid of cells (a quarter of the image size).
Every cell predicts (as in CenterNet, Zhou et al. 2019) whether an object's
centre falls in it (a heatmap trained with the focal loss against Gaussian
bumps), where inside the cell that centre is (a sub-cell offset), and the
object's size, colour, material and shape. Centres come from the renderer's
ground truth: the projection of each object's 3D centre into the image.

Decoding keeps the local maxima of the heatmap above a threshold (at most 10
objects); a perceived centre and the perceived size (hence the height of the
centre above the ground, its radius) give the object's world coordinates
through the camera, so left / right / front / behind come out as in CLEVR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from clevr_game.scene import Scene
from clevr_game.vocab import ATTRIBUTES, CLEVR
from players.pixel.layers import conv_block, coordinate_maps, normalise_images
from players.pixel.projection import ground_points, image_points

PERCEIVED_VOCABULARY = CLEVR
ATTRIBUTE_SIZES: tuple[int, ...] = tuple(len(CLEVR.values(a)) for a in ATTRIBUTES)
MAX_PERCEIVED = 10
STRIDE = 4
"""Image pixels per grid cell along each axis (two stride-2 convolutions)."""


@dataclass(frozen=True)
class PerceptionConfig:
    channels: int = 32
    width: int = 64
    heatmap_sigma: float = 1.0  # in cells
    threshold: float = 0.3


class PerceptionMaps(NamedTuple):
    """heat (B, h, w) logits, offsets (B, 2, h, w) in cells (x, y), attributes (B, sum of sizes, h, w) logits."""

    heat: torch.Tensor
    offsets: torch.Tensor
    attributes: torch.Tensor


class SceneTargets(NamedTuple):
    """Ground truth of a batch of scenes: points (B, 10, 2) in pixels, attribute ids (B, 10, 4), present (B, 10)."""

    points: torch.Tensor
    attributes: torch.Tensor
    present: torch.Tensor


class PerceptionNetwork(nn.Module):
    """Stride-4 CNN with coordinate maps and dilated context layers; three 1x1 heads."""

    def __init__(self, config: PerceptionConfig):
        super().__init__()
        self.config = config
        c, w = config.channels, config.width
        self.early = nn.Sequential(conv_block(3, c, stride=2), conv_block(c, c), conv_block(c, w, stride=2))
        # Dilations 1, 2, 4 reach about 67 pixels: a large object near the camera fits inside.
        self.context = nn.Sequential(conv_block(w + 2, w), conv_block(w, w, dilation=2), conv_block(w, w, dilation=4))
        self.heat = nn.Conv2d(w, 1, 1)
        self.offsets = nn.Conv2d(w, 2, 1)
        self.attributes = nn.Conv2d(w, sum(ATTRIBUTE_SIZES), 1)
        # Objects are rare among the cells: start the heatmap near 1% (CenterNet's prior).
        nn.init.constant_(self.heat.bias, -4.6)

    def forward(self, images: torch.Tensor) -> PerceptionMaps:
        features = self.early(normalise_images(images))
        batch, _, height, width = features.shape
        features = self.context(torch.cat([features, coordinate_maps(batch, height, width, features.device)], 1))
        return PerceptionMaps(self.heat(features)[:, 0], self.offsets(features), self.attributes(features))


def scene_targets(scenes: list[Scene], width: int, height: int) -> SceneTargets:
    """Projected centres (at the image size) and CLEVR attribute ids of up to 10 objects per scene."""
    points = np.zeros((len(scenes), MAX_PERCEIVED, 2), dtype=np.float32)
    attributes = np.zeros((len(scenes), MAX_PERCEIVED, len(ATTRIBUTES)), dtype=np.int64)
    present = np.zeros((len(scenes), MAX_PERCEIVED), dtype=bool)
    for row, scene in enumerate(scenes):
        objects = scene.objects[:MAX_PERCEIVED]
        if not objects:
            continue
        points[row, : len(objects)] = image_points(scene.coords()[: len(objects)], width, height)
        attributes[row, : len(objects)] = [
            [PERCEIVED_VOCABULARY.index(a, obj.attribute(a)) for a in ATTRIBUTES] for obj in objects
        ]
        present[row, : len(objects)] = True
    return SceneTargets(torch.from_numpy(points), torch.from_numpy(attributes), torch.from_numpy(present))


def _centre_cells(targets: SceneTargets, grid_height: int, grid_width: int) -> tuple[torch.Tensor, ...]:
    """Batch row, cell row, cell column and sub-cell offsets (x, y) of every object whose centre is in the image."""
    cells = targets.points / STRIDE
    column, row = cells[..., 0].floor().long(), cells[..., 1].floor().long()
    inside = targets.present & (column >= 0) & (column < grid_width) & (row >= 0) & (row < grid_height)
    batch_index, slot = inside.nonzero(as_tuple=True)
    offsets = cells[batch_index, slot] - torch.stack([column, row], dim=-1)[batch_index, slot].float()
    return batch_index, slot, row[batch_index, slot], column[batch_index, slot], offsets


def heatmap_targets(targets: SceneTargets, grid_height: int, grid_width: int, sigma: float) -> torch.Tensor:
    """(B, h, w): the maximum over objects of a Gaussian bump at each centre, exactly 1 at its cell."""
    cells = targets.points / STRIDE  # (B, N, 2)
    ys = torch.arange(grid_height, dtype=torch.float32, device=cells.device) + 0.5
    xs = torch.arange(grid_width, dtype=torch.float32, device=cells.device) + 0.5
    dx = xs.view(1, 1, 1, -1) - cells[..., 0].view(*cells.shape[:2], 1, 1)
    dy = ys.view(1, 1, -1, 1) - cells[..., 1].view(*cells.shape[:2], 1, 1)
    bumps = torch.exp(-(dx**2 + dy**2) / (2 * sigma**2)) * targets.present.view(*cells.shape[:2], 1, 1)
    heat = (bumps.amax(dim=1) if cells.shape[1]
            else torch.zeros(cells.shape[0], grid_height, grid_width, device=cells.device))
    batch_index, _, row, column, _ = _centre_cells(targets, grid_height, grid_width)
    heat[batch_index, row, column] = 1.0
    return heat


def focal_loss(logits: torch.Tensor, target: torch.Tensor, objects: int) -> torch.Tensor:
    """CenterNet's penalty-reduced focal loss (alpha 2, beta 4), per object."""
    probability = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    positive = target >= 1.0
    positive_loss = -((1 - probability) ** 2) * torch.log(probability)
    negative_loss = -((1 - target) ** 4) * probability**2 * torch.log(1 - probability)
    total = torch.where(positive, positive_loss, negative_loss).sum()
    return total / max(objects, 1)


def perception_loss(maps: PerceptionMaps, targets: SceneTargets, sigma: float) -> tuple[torch.Tensor, dict[str, float]]:
    """Heatmap focal loss + offset L1 + attribute cross-entropy at the centre cells."""
    _, grid_height, grid_width = maps.heat.shape
    heat = heatmap_targets(targets, grid_height, grid_width, sigma)
    batch_index, slot, row, column, offsets = _centre_cells(targets, grid_height, grid_width)
    objects = len(batch_index)
    heat_loss = focal_loss(maps.heat, heat, objects)
    predicted_offsets = maps.offsets[batch_index, :, row, column]  # (K, 2)
    offset_loss = nn.functional.l1_loss(predicted_offsets, offsets) if objects else maps.offsets.sum() * 0
    logits = maps.attributes[batch_index, :, row, column]  # (K, sum of sizes)
    attribute_loss = maps.attributes.sum() * 0
    for index, part in enumerate(logits.split(ATTRIBUTE_SIZES, dim=1)):
        if objects:
            attribute_loss = attribute_loss + nn.functional.cross_entropy(part, targets.attributes[batch_index, slot, index])
    loss = heat_loss + offset_loss + attribute_loss
    parts = {"heat": heat_loss.item(), "offset": offset_loss.item(), "attributes": attribute_loss.item()}
    return loss, parts


@dataclass
class PerceivedScene:
    """Objects read from one image: world coordinates (N, 3), CLEVR attribute ids (N, 4), scores (N,)."""

    coords: np.ndarray
    attributes: np.ndarray
    scores: np.ndarray
    points: np.ndarray  # (N, 2) image points in pixels

    def to_scene(self) -> Scene:
        """A CLEVR Scene of the perceived objects (for inspection, export or the oracle)."""
        from clevr_game.scene import SceneObject

        objects = [
            SceneObject(
                **{a: PERCEIVED_VOCABULARY.values(a)[int(ids[k])] for k, a in enumerate(ATTRIBUTES)},
                coords=(float(c[0]), float(c[1]), float(c[2])),
            )
            for ids, c in zip(self.attributes, self.coords, strict=True)
        ]
        scene = Scene(objects=objects, vocabulary=PERCEIVED_VOCABULARY)
        scene.relationships = scene.computed_relationships()
        return scene


def decode_maps(maps: PerceptionMaps, threshold: float, width: int, height: int) -> list[PerceivedScene]:
    """Local maxima of the heatmap above `threshold` (at most 10, best first) as perceived objects."""
    probability = torch.sigmoid(maps.heat)
    peaks = probability == nn.functional.max_pool2d(probability.unsqueeze(1), 3, 1, 1)[:, 0]
    scored = torch.where(peaks & (probability > threshold), probability, torch.zeros_like(probability))
    grid_width = scored.shape[2]
    scenes = []
    for image in range(scored.shape[0]):
        values, cells = scored[image].flatten().topk(min(MAX_PERCEIVED, scored[image].numel()))
        keep = values > 0
        values, cells = values[keep], cells[keep]
        row, column = cells // grid_width, cells % grid_width
        offsets = maps.offsets[image, :, row, column].T.clamp(0.0, 1.0)  # (N, 2)
        points = (torch.stack([column, row], dim=1).float() + offsets) * STRIDE
        logits = maps.attributes[image, :, row, column].T  # (N, sum of sizes)
        ids = torch.stack([part.argmax(dim=1) for part in logits.split(ATTRIBUTE_SIZES, dim=1)], dim=1)
        ids_np = ids.cpu().numpy().astype(np.int64).reshape(-1, len(ATTRIBUTES))
        radii = np.array([PERCEIVED_VOCABULARY.radius(PERCEIVED_VOCABULARY.sizes[k]) for k in ids_np[:, 0]])
        points_np = points.cpu().numpy().astype(np.float64).reshape(-1, 2)
        coords = ground_points(points_np, radii, width, height) if len(ids_np) else np.zeros((0, 3))
        scenes.append(PerceivedScene(coords, ids_np, values.cpu().numpy(), points_np))
    return scenes
