"""The object-centric pixel network (`object-transformer`): object slots from the image, fused with the
question's words in one transformer that answers directly, with no program executor.

The MDETR idea (Kamath et al. 2021: a detector's object queries and the text in
one transformer) on a CPU budget. The slots come from the neuro-symbolic
player's perception (`players.pixel.perception`): per grid cell an object
heatmap, a sub-cell offset and attribute logits. The `slots` best cells by
objectness (local maxima of the heatmap, so one object gives one slot) become
object tokens, each built from

- its objectness score;
- its attribute probabilities (size, colour, material, shape), a soft version
  of the state transformer's attribute embeddings;
- its position on the ground in the camera's frame (right, behind) / 3, the
  state players' frame: the detected centre taken through CLEVR's camera onto
  the plane at the detected size's radius, with Fourier features;
- the perception CNN's feature vector at that cell (what the heads saw).

A slot whose score is below the perception threshold is the learned empty token,
as an empty slot of the state transformer. The tokens [answer, object slots,
question words] with type embeddings go through the state transformer's
pre-norm layers (attention between slots gets a learned per-head bias for their
spatial relation code, CLEVR's 0.2 margin rule on the detected positions), and a
linear classifier reads the answer token.

The perception is frozen (trained by the neuro-symbolic player, copied into this
network when training starts): its detections are computed once per image and
only the reasoning transformer learns.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from clevr_game.scene import DEFAULT_DIRECTIONS
from clevr_game.vocab import ATTRIBUTES
from players.pixel.models import coordinate_maps, normalise_images
from players.pixel.perception import (
    ATTRIBUTE_SIZES,
    PERCEIVED_VOCABULARY,
    STRIDE,
    PerceptionConfig,
    PerceptionNetwork,
)
from players.pixel.projection import ground_points
from players.state.features import MAX_QUESTION_TOKENS, POSITION_SCALE
from players.state.models import RelationBiasedLayer, relation_codes

_SIZE_RADII = torch.tensor([PERCEIVED_VOCABULARY.radius(s) for s in PERCEIVED_VOCABULARY.sizes], dtype=torch.float64)
_GROUND_AXES = np.array([DEFAULT_DIRECTIONS["right"][:2], DEFAULT_DIRECTIONS["behind"][:2]], dtype=np.float64)


@dataclass(frozen=True)
class ObjectTransformerConfig:
    width: int = 96
    layers: int = 4
    heads: int = 4
    feedforward: int = 192
    fourier_bands: int = 6
    slots: int = 10
    relation_bias: bool = True
    dropout: float = 0.0
    perception: PerceptionConfig = field(default_factory=PerceptionConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ObjectTransformerConfig:
        """From a player file's config dict; TypeError for an unknown key (as a dataclass would give)."""
        data = dict(data)
        perception = PerceptionConfig(**data.pop("perception", {}))
        return replace(cls(**data), perception=perception)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ObjectTokens(NamedTuple):
    """Detections of a batch of images, `slots` per image, best first.

    scores (B, K) objectness in 0..1; positions (B, K, 2) ground frame / 3;
    attributes (B, K, 15) probabilities, one distribution per attribute;
    features (B, K, C) the perception CNN's features at the cell.
    """

    scores: torch.Tensor
    positions: torch.Tensor
    attributes: torch.Tensor
    features: torch.Tensor

    def select(self, rows: torch.Tensor | np.ndarray) -> ObjectTokens:
        """The detections of images `rows` (one per question, repeats allowed)."""
        rows = torch.as_tensor(rows, device=self.scores.device)
        return ObjectTokens(*(t[rows] for t in self))

    def to(self, device: torch.device | str) -> ObjectTokens:
        return ObjectTokens(*(t.to(device) for t in self))


def _at_cells(maps: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    """(B, C, h, w) maps read at flat cell indices (B, K) -> (B, K, C)."""
    flat = maps.flatten(2)
    return flat.gather(2, cells.unsqueeze(1).expand(-1, flat.shape[1], -1)).transpose(1, 2)


def ground_frame(points: torch.Tensor, size_logits: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """(B, K, 2) image points in pixels -> (B, K, 2) ground positions (right, behind) / 3.

    The centre's height is the radius of the most likely size, as the neuro-symbolic
    player's decoding assumes.
    """
    radii = _SIZE_RADII[size_logits.argmax(dim=-1).cpu()].numpy()
    world = ground_points(points.detach().cpu().double().numpy().reshape(-1, 2), radii.reshape(-1), width, height)
    frame = (world[:, :2] @ _GROUND_AXES.T) / POSITION_SCALE
    return torch.from_numpy(frame.astype(np.float32)).view(*points.shape).to(points.device)


class SlotEncoder(nn.Module):
    """One vector per detection slot: score, soft attributes, Fourier-featured ground position, CNN feature."""

    def __init__(self, width: int, fourier_bands: int, feature_width: int, threshold: float):
        super().__init__()
        self.threshold = threshold
        self.register_buffer(
            "frequencies", math.pi * (2.0 ** torch.arange(fourier_bands, dtype=torch.float32)), persistent=False
        )
        self.position = nn.Linear(2 + 4 * fourier_bands, width)
        self.attributes = nn.Linear(sum(ATTRIBUTE_SIZES), width, bias=False)
        self.appearance = nn.Linear(feature_width, width)
        self.score = nn.Linear(1, width, bias=False)
        self.empty = nn.Parameter(torch.zeros(width))
        nn.init.normal_(self.empty, std=0.02)

    def forward(self, tokens: ObjectTokens) -> torch.Tensor:
        angles = tokens.positions.unsqueeze(-1) * self.frequencies
        fourier = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(-2)
        encoded = (self.position(torch.cat([tokens.positions, fourier], dim=-1))
                   + self.attributes(tokens.attributes) + self.appearance(tokens.features)
                   + self.score(tokens.scores.unsqueeze(-1)))
        return torch.where((tokens.scores > self.threshold).unsqueeze(-1), encoded, self.empty)


class ObjectTransformerNetwork(nn.Module):
    """Frozen perception -> object slots; [answer, slots, words] -> transformer -> answer logits."""

    TYPE_ANSWER, TYPE_OBJECT, TYPE_WORD = 0, 1, 2

    def __init__(self, config: ObjectTransformerConfig, vocabulary_size: int, answer_count: int):
        super().__init__()
        self.config = config
        width = config.width
        self.perception = PerceptionNetwork(config.perception)
        self.perception.requires_grad_(False)
        self.slots = SlotEncoder(width, config.fourier_bands, config.perception.width, config.perception.threshold)
        self.words = nn.Embedding(vocabulary_size, width, padding_idx=0)
        self.word_positions = nn.Embedding(MAX_QUESTION_TOKENS, width)
        self.types = nn.Embedding(3, width)
        self.answer_token = nn.Parameter(torch.zeros(width))
        self.layers = nn.ModuleList(
            RelationBiasedLayer(width, config.heads, config.feedforward, config.dropout) for _ in range(config.layers)
        )
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, answer_count))

    def train(self, mode: bool = True) -> ObjectTransformerNetwork:
        # The frozen perception keeps its batch-norm statistics: it stays in eval mode.
        super().train(mode)
        self.perception.eval()
        return self

    @torch.no_grad()
    def detect(self, images: torch.Tensor) -> ObjectTokens:
        """The `slots` best detections of each image (B, H, W, 3) uint8."""
        perception = self.perception
        features = perception.early(normalise_images(images))
        batch, _, grid_height, grid_width = features.shape
        coordinates = coordinate_maps(batch, grid_height, grid_width, features.device)
        features = perception.context(torch.cat([features, coordinates], 1))
        heat = torch.sigmoid(perception.heat(features)[:, 0])
        peaks = heat == nn.functional.max_pool2d(heat.unsqueeze(1), 3, 1, 1)[:, 0]
        scores, cells = torch.where(peaks, heat, torch.zeros_like(heat)).flatten(1).topk(self.config.slots, dim=1)
        offsets = _at_cells(perception.offsets(features), cells).clamp(0.0, 1.0)
        cell_xy = torch.stack([cells % grid_width, cells // grid_width], dim=-1).float()
        points = (cell_xy + offsets) * STRIDE
        logits = _at_cells(perception.attributes(features), cells)
        parts = logits.split(ATTRIBUTE_SIZES, dim=-1)
        attributes = torch.cat([part.softmax(dim=-1) for part in parts], dim=-1)
        positions = ground_frame(points, parts[ATTRIBUTES.index("size")], images.shape[2], images.shape[1])
        return ObjectTokens(scores, positions, attributes, _at_cells(features, cells))

    def reason(self, tokens: ObjectTokens, words: torch.Tensor) -> torch.Tensor:
        """Answer logits (Q, answers) of questions `words` (Q, L) about their images' detections (Q rows)."""
        batch_size, length = words.shape
        slots = self.slots(tokens) + self.types.weight[self.TYPE_OBJECT]
        steps = torch.arange(length, device=words.device)
        embedded = self.words(words) + self.word_positions(steps) + self.types.weight[self.TYPE_WORD]
        answer = (self.answer_token + self.types.weight[self.TYPE_ANSWER]).expand(batch_size, 1, -1)
        sequence = torch.cat([answer, slots, embedded], dim=1)
        first_word = 1 + self.config.slots
        key_bias = torch.zeros(batch_size, 1, 1, sequence.shape[1], device=sequence.device)
        key_bias[:, 0, 0, first_word:] = torch.where(words == 0, float("-inf"), 0.0)
        # An empty slot sits at the origin, as in the state players' arrays: its relation codes carry no junk.
        present = (tokens.scores > self.slots.threshold).unsqueeze(-1)
        positions = torch.where(present, tokens.positions, torch.zeros_like(tokens.positions))
        codes = relation_codes(positions) if self.config.relation_bias else None
        object_slots = slice(1, first_word)
        for layer in self.layers:
            sequence = layer(sequence, key_bias, codes, object_slots)
        return self.head(sequence[:, 0])

    def forward(self, images: torch.Tensor, words: torch.Tensor, image_of: torch.Tensor | None = None) -> torch.Tensor:
        """Answer logits; question q asks about images[image_of[q]] (images[q] without `image_of`)."""
        tokens = self.detect(images)
        return self.reason(tokens if image_of is None else tokens.select(image_of), words)


def perception_state(neuro_symbolic_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The perception weights of a neuro-symbolic player file's state dict, keyed for `PerceptionNetwork`."""
    prefix = "perception."
    return {name[len(prefix):]: tensor for name, tensor in neuro_symbolic_state.items() if name.startswith(prefix)}
