"""The pixel-input adversary's eyes: a pixel relation network pre-trained on question answering.

It sees each item's original image (rendered once, through the renderer's cache)
and the question, nothing of the scene graph except where each of its heads'
objects lies in the image (heads are tied to objects, so a head must know which
one it moves). The global vector is the network's g averaged over every pair of
image cells with the question; a head's slot is the CNN feature map sampled at
its object's projected pixel position, followed by that position in -1..1.

The image of an item never changes during an attack, so the features are computed
once per item, as FeatureCache does for the state-input adversary.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from clevr_game.errors import InputError
from clevr_game.scene import IMAGE_HEIGHT, IMAGE_WIDTH, project_to_pixels
from clevr_game.text import WordVocabulary
from envs.items import MAX_OBJECTS, ItemPool
from players.pixel.checkpoint import PLAYER_KINDS, PixelPlayerFile, load_player_file
from players.pixel.images import ImageSpec, load_image
from players.pixel.models import PixelRelationNetwork, coordinate_maps, normalise_images
from players.state.features import MAX_QUESTION_TOKENS

DEFAULT_PIXEL_WEIGHTS = Path(__file__).resolve().parent / "weights" / "adversary-pixel-rn.pt"


def load_pixel_adversary_network(
    path: str | os.PathLike[str] | None, env_words: WordVocabulary
) -> tuple[PixelRelationNetwork, np.ndarray, ImageSpec]:
    """The frozen pixel relation network, env word id -> its word id, and the image spec it reads."""
    from agents.pretrained import word_map

    path = Path(path) if path else DEFAULT_PIXEL_WEIGHTS
    player_file: PixelPlayerFile = load_player_file(path)
    if player_file.kind != PLAYER_KINDS["pixel-rn"]:
        raise InputError(f"{path}: the pixel adversary needs a pixel-rn player file, this one holds "
                         f"a {player_file.kind!r} model")
    network = player_file.build("cpu")
    network.requires_grad_(False)
    network.eval()
    return network, word_map(env_words, WordVocabulary(player_file.words[2:])), player_file.image


def image_positions(pool: ItemPool) -> np.ndarray:
    """(I, 10, 2): each object's projected position in the image, x and y in -1..1 (0 for empty slots)."""
    coords = np.concatenate([pool.xy, pool.z[..., None]], axis=-1).reshape(-1, 3)
    pixels = project_to_pixels(coords)[:, :2] / np.array([IMAGE_WIDTH, IMAGE_HEIGHT]) * 2.0 - 1.0
    return np.where(pool.present[..., None], pixels.reshape(len(pool), MAX_OBJECTS, 2), 0.0)


def render_originals(pool: ItemPool, spec: ImageSpec, renderer: object | None = None) -> np.ndarray:
    """(I, H, W, 3) uint8: every item's original scene at the spec, rendered once (the renderer caches)."""
    from clevr_game.render import Renderer

    owned = renderer is None
    renderer = renderer or Renderer(spec.preset, width=spec.width, height=spec.height)
    try:
        with tempfile.TemporaryDirectory(prefix="clevr-adversary-images-") as folder:
            scenes = [item.scene for item in pool.items]
            names = [f"{renderer.image_key(scene)}.png" for scene in scenes]
            paths = renderer.render_many(scenes, folder, names=names)
            return np.stack([load_image(path, spec) for path in paths])
    finally:
        if owned:
            renderer.close()


class PixelFeatureCache:
    """Frozen features of every item from its original image: (global (I, G), slots (I, 10, C + 2))."""

    def __init__(self, network: PixelRelationNetwork, word_map: np.ndarray, pool: ItemPool, images: np.ndarray,
                 batch: int = 64):
        if len(images) != len(pool):
            raise ValueError(f"{len(images)} images for {len(pool)} items")
        tokens = pool.question_tokens[:, :MAX_QUESTION_TOKENS].astype(np.int64)
        words = torch.as_tensor(word_map[np.clip(tokens, 0, len(word_map) - 1)])
        where = torch.as_tensor(image_positions(pool), dtype=torch.float32)
        globals_, slots_ = [], []
        network.eval()
        with torch.no_grad():
            for start in range(0, len(pool), batch):
                part = torch.as_tensor(images[start:start + batch])
                feature_map = network.cnn(normalise_images(part))
                count, _, height, width = feature_map.shape
                cells = torch.cat([feature_map, coordinate_maps(count, height, width, feature_map.device)], dim=1)
                cells = cells.flatten(2).transpose(1, 2)
                globals_.append(network.relations(cells, words[start:start + batch]))
                position = where[start:start + batch]
                # grid_sample reads x, y in -1..1 with align_corners=True as the outermost cell centres.
                sampled = F.grid_sample(feature_map, position[:, :, None, :], align_corners=True)
                slots_.append(torch.cat([sampled[..., 0].transpose(1, 2), position], dim=-1))
        self.globals = torch.cat(globals_)
        self.objects = torch.cat(slots_) * torch.as_tensor(pool.present, dtype=torch.float32)[..., None]
        self.present = torch.as_tensor(pool.present)
        self.global_dim = int(self.globals.shape[1])
        self.slot_dim = int(self.objects.shape[2])

    def parameters(self) -> list[torch.nn.Parameter]:
        return []  # frozen: the adversary's image encoder is not trained by the attack

    def lookup(self, indices: np.ndarray, heads: np.ndarray, observation: dict[str, np.ndarray] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(global, slot encodings, presence) of items under head assignments (B, 10); the observation is unused."""
        rows = torch.as_tensor(indices, dtype=torch.long)
        slots = torch.as_tensor(heads, dtype=torch.long)
        return self.globals[rows], self.objects[rows[:, None], slots], self.present[rows[:, None], slots].float()
