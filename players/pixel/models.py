"""Pixel-input question answering networks: a CNN relation network and FiLM.

Both read `(images, words)`: images (B, H, W, 3) uint8 as rendered, word ids
(B, L) with 0 as padding; both return logits over the answer classes. A config
is a plain dataclass so the player file stores it as a dict.

- `PixelRelationNetwork` (Santoro et al. 2017): a small strided CNN, every
  cell of its last feature map (with its coordinates) is an object, and
  f(sum over cell pairs of g(o_i, o_j, q)) answers.
- `FiLMNetwork` (Perez et al. 2018): a CNN stem, residual blocks whose
  normalised features are scaled and shifted per channel by the question
  (gamma, beta from a GRU), coordinate maps before each block, a max-pooled
  classifier.

Either can read the image through a pretrained, frozen backbone instead of
learning its first layers from pixels (config `backbone="perception"`; the
FiLM paper fed FiLM frozen ImageNet features): the neuro-symbolic player's
perception CNN up to its feature map (`PerceptionBackbone`, 64 channels at a
quarter of the image size), its weights copied in by the trainer and saved with
the model. Its output depends on the image alone, so a trainer can compute it
once per image (`image_features`) and train the rest from it (`answer`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from clevr_game.errors import InputError

# The shared blocks are re-exported: agents and the object transformer import them from here.
from players.pixel.layers import conv_block as conv_block
from players.pixel.layers import coordinate_maps as coordinate_maps
from players.pixel.layers import normalise_images as normalise_images
from players.pixel.perception import ATTRIBUTE_SIZES, PerceptionConfig, PerceptionNetwork

BACKBONES = ("none", "perception", "attributes")
"""`none`: the model learns from pixels; `perception`: it reads the frozen neuro-symbolic perception's features;
`attributes`: it reads that perception's output maps (objectness, offsets, attribute probabilities per cell)."""

PERCEPTION_BACKBONE_STRIDE = 4
"""Image pixels per backbone cell along each axis (the perception's two stride-2 layers)."""


def _check_backbone(name: str) -> None:
    if name not in BACKBONES:
        raise InputError(f"backbone {name!r}: expected one of {', '.join(map(repr, BACKBONES))}")


class PerceptionBackbone(nn.Module):
    """The neuro-symbolic perception's `early` + `context` layers, frozen: (B, 64, H/4, W/4) features of an image.

    The layer widths are pinned to the shipped perception's (32 and 64 channels) rather than read from
    `PerceptionConfig`'s defaults, so a saved player keeps loading if those defaults change. It never
    trains: no gradients, and it stays in eval mode (its batch-norm statistics are the perception's).
    """

    channels = 64

    def __init__(self) -> None:
        super().__init__()
        perception = PerceptionNetwork(PerceptionConfig(channels=32, width=self.channels))
        self.early, self.context = perception.early, perception.context
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True) -> PerceptionBackbone:
        return super().train(False)

    def load_perception(self, perception_state: dict[str, torch.Tensor]) -> None:
        """Copy the `early` and `context` weights of a `PerceptionNetwork` state dict (its heads are not used);
        InputError when their shapes differ from this backbone's."""
        wanted = self.state_dict()
        state = {name: tensor for name, tensor in perception_state.items() if name in wanted}
        wrong = sorted(name for name, tensor in state.items() if tensor.shape != wanted[name].shape)
        missing = sorted(set(wanted) - set(state))
        if wrong or missing:
            raise InputError(f"the perception's layers do not fit the backbone (channels 32, width "
                             f"{self.channels}): {', '.join((wrong + missing)[:3])} ...")
        self.load_state_dict(state)

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, H, W, 3) uint8 -> (B, 64, H/4, W/4) float, exactly the perception's map before its heads."""
        features = self.early(normalise_images(images))
        batch, _, height, width = features.shape
        return self.context(torch.cat([features, coordinate_maps(batch, height, width, features.device)], 1))


class AttributeMapsBackbone(nn.Module):
    """The whole neuro-symbolic perception, frozen: (B, 18, H/4, W/4) maps of what it sees in each cell.

    Channels: the objectness probability, the sub-cell offset (x, y), and each attribute's probabilities
    (size, colour, material, shape; 15 values), the attribute channels multiplied by the objectness so
    that empty cells read as zeros. A player on these maps starts from what the perception reads, not
    from its features: filtering by colour is choosing a channel.
    """

    channels = 3 + sum(ATTRIBUTE_SIZES)

    def __init__(self) -> None:
        super().__init__()
        self.perception = PerceptionNetwork(PerceptionConfig(channels=32, width=PerceptionBackbone.channels))
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True) -> AttributeMapsBackbone:
        return super().train(False)

    def load_perception(self, perception_state: dict[str, torch.Tensor]) -> None:
        """Copy a `PerceptionNetwork` state dict, heads included; InputError when it does not fit."""
        wanted = self.perception.state_dict()
        wrong = sorted(name for name, tensor in perception_state.items()
                       if name in wanted and tensor.shape != wanted[name].shape)
        missing = sorted(set(wanted) - set(perception_state))
        if wrong or missing:
            raise InputError(f"the perception does not fit the attribute-maps backbone: "
                             f"{', '.join((wrong + missing)[:3])} ...")
        self.perception.load_state_dict({name: perception_state[name] for name in wanted})

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        maps = self.perception(images)
        objectness = torch.sigmoid(maps.heat)[:, None]
        probabilities = torch.cat([part.softmax(dim=1) for part in maps.attributes.split(ATTRIBUTE_SIZES, dim=1)], 1)
        return torch.cat([objectness, maps.offsets, objectness * probabilities], dim=1)


def make_backbone(name: str) -> PerceptionBackbone | AttributeMapsBackbone | None:
    """The frozen backbone a config names (None for `none`: the model learns from pixels)."""
    return {"perception": PerceptionBackbone, "attributes": AttributeMapsBackbone}.get(name, lambda: None)()


class QuestionEncoder(nn.Module):
    """Word embeddings and a one-way recurrent network; the question is its state at the last word."""

    def __init__(self, vocabulary_size: int, word_width: int, width: int, cell: str = "lstm"):
        super().__init__()
        self.words = nn.Embedding(vocabulary_size, word_width, padding_idx=0)
        recurrent = nn.LSTM if cell == "lstm" else nn.GRU
        self.recurrent = recurrent(word_width, width, batch_first=True)

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.recurrent(self.words(words))
        # One-way, so the output at the last real word has not seen the padding after it.
        last = ((words != 0).sum(dim=1) - 1).clamp(min=0)
        return outputs[torch.arange(words.shape[0], device=words.device), last]


RELATION_PRECISIONS = ("float32", "bfloat16")


@functools.cache
def cpu_computes_bfloat16() -> bool:
    """Whether this CPU's oneDNN has bfloat16 kernels (it needs AVX-512 at least); on AVX2 alone it emulates them.

    Measured (docs/exhaustive.md, "pixel-rn in bfloat16"): pixel-rn's step under bfloat16 autocast was 1.8 times
    faster than float32 on an AVX-512 CPU with bfloat16 kernels, and took about six times as long on an AVX2-only one.
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False


class _BFloat16Linear(torch.autograd.Function):
    """A linear layer as bfloat16 autocast computes it, with float32 matrix products: the operands rounded to
    bfloat16, the products summed in float32, the result (and each gradient) rounded to bfloat16. With oneDNN's own
    emulation of bfloat16 products on a CPU without bfloat16 instructions, pixel-rn's step took 4.56 times as long
    (docs/exhaustive.md, "pixel-rn in bfloat16")."""

    @staticmethod
    def forward(ctx: Any, values: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        rounded_weight = weight.to(torch.bfloat16)
        product = values.float() @ rounded_weight.float().t()
        if bias is not None:
            product += bias.to(torch.bfloat16).float()
        ctx.save_for_backward(values, rounded_weight)
        ctx.has_bias = bias is not None
        return product.to(torch.bfloat16)

    @staticmethod
    def backward(ctx: Any, gradient: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        values, rounded_weight = ctx.saved_tensors
        rows = gradient.float().reshape(-1, gradient.shape[-1])
        to_values = (rows @ rounded_weight.float()).to(torch.bfloat16).reshape(values.shape)
        to_weight = (rows.t() @ values.float().reshape(-1, values.shape[-1])).to(torch.bfloat16).float()
        to_bias = rows.sum(dim=0).to(torch.bfloat16).float() if ctx.has_bias else None
        return to_values, to_weight, to_bias


def bfloat16_linear(layer: nn.Linear, values: torch.Tensor) -> torch.Tensor:
    """`layer(values)` as under bfloat16 autocast (bfloat16 in and out, float32 weights and their gradients),
    computed with float32 products."""
    return _BFloat16Linear.apply(values.to(torch.bfloat16), layer.weight, layer.bias)


@dataclass(frozen=True)
class PixelRNConfig:
    channels: int = 24
    conv_layers: int = 4
    word_width: int = 32
    question_width: int = 128
    g_width: int = 128
    g_layers: int = 3
    f_width: int = 128
    dropout: float = 0.1
    backbone: str = "none"
    """`perception`: the frozen perception stands in for the first two of the `conv_layers` stride-2 layers
    (same cell grid: 8 x 6 cells at 128 x 96 with 4 layers); the rest train on its features."""
    relation_precision: str = "float32"
    """`bfloat16`: g over the cell pairs (nearly all of a step's work: 2,304 pairs per question on the
    8 x 6 grid) runs under bfloat16 autocast, its weights and gradients staying float32; about half the
    step time on a CPU with bfloat16 instructions (docs/exhaustive.md, "pixel-rn in bfloat16"). On a CPU
    without them, the same rounding with float32 products (`bfloat16_linear`)."""

    def __post_init__(self) -> None:
        _check_backbone(self.backbone)
        if self.relation_precision not in RELATION_PRECISIONS:
            raise InputError(f"relation_precision {self.relation_precision!r}: expected one of "
                             f"{', '.join(RELATION_PRECISIONS)}")
        if self.backbone != "none" and self.conv_layers < 3:
            raise InputError(f"conv_layers {self.conv_layers}: a backbone takes the first two stride-2 layers, "
                             "so at least 3 are needed")


class PixelRelationNetwork(nn.Module):
    """CNN cells as objects + question LSTM + relation network (Santoro et al. 2017)."""

    def __init__(self, config: PixelRNConfig, vocabulary_size: int, answer_count: int):
        super().__init__()
        self.config = config
        self.emulate_bfloat16: bool | None = None
        """bfloat16 relations on the CPU: with float32 products (True) or oneDNN's bfloat16 ones (False);
        None: float32 products where the CPU has no bfloat16 instructions (`cpu_computes_bfloat16`)."""
        self.backbone = make_backbone(config.backbone)
        if self.backbone is None:
            layers = [conv_block(3 if i == 0 else config.channels, config.channels, stride=2)
                      for i in range(config.conv_layers)]
        else:
            layers = [conv_block(self.backbone.channels if i == 0 else config.channels, config.channels, stride=2)
                      for i in range(config.conv_layers - 2)]
        self.cnn = nn.Sequential(*layers)
        self.question = QuestionEncoder(vocabulary_size, config.word_width, config.question_width)
        cell_width = config.channels + 2  # features and the cell's coordinates
        # g's first layer is linear in [o_i, o_j, q]: three projections broadcast over the pairs.
        self.first_i = nn.Linear(cell_width, config.g_width, bias=False)
        self.first_j = nn.Linear(cell_width, config.g_width, bias=False)
        self.first_q = nn.Linear(config.question_width, config.g_width)
        rest: list[nn.Module] = []
        for _ in range(config.g_layers - 1):
            rest += [nn.ReLU(), nn.Linear(config.g_width, config.g_width)]
        self.g_rest = nn.Sequential(*rest, nn.ReLU())
        self.f = nn.Sequential(
            nn.Linear(config.g_width, config.f_width), nn.ReLU(), nn.Dropout(config.dropout),
            nn.Linear(config.f_width, config.f_width), nn.ReLU(), nn.Dropout(config.dropout),
            nn.Linear(config.f_width, answer_count),
        )

    def image_features(self, images: torch.Tensor) -> torch.Tensor:
        """What the frozen part of the network makes of the images: the backbone's features, or the
        normalised pixels without a backbone."""
        return normalise_images(images) if self.backbone is None else self.backbone(images)

    def cells(self, images: torch.Tensor) -> torch.Tensor:
        """(B, N, C + 2): the feature vector and coordinates of every cell of the last feature map."""
        return self.cells_from(self.image_features(images))

    def cells_from(self, image_features: torch.Tensor) -> torch.Tensor:
        """`cells` from `image_features`' output."""
        features = self.cnn(image_features)
        batch, _, height, width = features.shape
        features = torch.cat([features, coordinate_maps(batch, height, width, features.device)], dim=1)
        return features.flatten(2).transpose(1, 2)

    def relations(self, objects: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """(B, g_width): g over every pair of cells (`objects` from `cells`) and the question, averaged."""
        question = self.question(words)
        low = self.config.relation_precision == "bfloat16"
        if low and objects.device.type == "cpu" and (
                not cpu_computes_bfloat16() if self.emulate_bfloat16 is None else self.emulate_bfloat16):
            return self._emulated_bfloat16_relations(objects, question)
        with torch.autocast(objects.device.type, dtype=torch.bfloat16, enabled=low):
            first = (
                self.first_i(objects).unsqueeze(2)
                + self.first_j(objects).unsqueeze(1)
                + self.first_q(question)[:, None, None, :]
            )
            # The mean, not Santoro's sum, over the pairs: the scale does not grow with the grid.
            pooled = self.g_rest(first).mean(dim=(1, 2))
        return pooled.float()

    def _emulated_bfloat16_relations(self, objects: torch.Tensor, question: torch.Tensor) -> torch.Tensor:
        """`relations` under bfloat16 autocast, its products in float32 (`bfloat16_linear`): bfloat16 values
        between the layers, so the adds, ReLUs and the mean round as autocast's do."""
        pairs = (
            bfloat16_linear(self.first_i, objects).unsqueeze(2)
            + bfloat16_linear(self.first_j, objects).unsqueeze(1)
            + bfloat16_linear(self.first_q, question)[:, None, None, :]
        )
        for layer in self.g_rest:
            pairs = bfloat16_linear(layer, pairs) if isinstance(layer, nn.Linear) else layer(pairs)
        return pairs.mean(dim=(1, 2)).float()

    def forward(self, images: torch.Tensor, words: torch.Tensor, image_of: torch.Tensor | None = None) -> torch.Tensor:
        """Answer logits; question q asks about images[image_of[q]] (images[q] without `image_of`)."""
        return self.answer(self.image_features(images), words, image_of)

    def answer(self, image_features: torch.Tensor, words: torch.Tensor,
               image_of: torch.Tensor | None = None) -> torch.Tensor:
        """`forward` from `image_features`' output (a trainer's cache of the frozen backbone's features)."""
        cells = self.cells_from(image_features)
        return self.f(self.relations(cells if image_of is None else cells[image_of], words))


FILM_BACKBONE_STRIDE = 2
"""Stride of the trainable projection after the backbone (see PIXEL_MODEL_CARD.md, "Pretrained backbone option")."""


@dataclass(frozen=True)
class FiLMConfig:
    stem_channels: int = 32
    stem_layers: int = 3
    width: int = 48
    blocks: int = 3
    word_width: int = 32
    question_width: int = 128
    classifier_width: int = 128
    dropout: float = 0.0
    backbone: str = "none"
    """`perception`: the frozen perception replaces the stem (`stem_channels`, `stem_layers` unused); one
    trainable stride-2 conv projects its features to `width`, the stem's 8-pixel cells."""

    def __post_init__(self) -> None:
        _check_backbone(self.backbone)


class FiLMBlock(nn.Module):
    """Perez et al.'s residual block: 1x1 conv, 3x3 conv, batch norm without affine, FiLM, ReLU, skip."""

    def __init__(self, width: int):
        super().__init__()
        self.entry = nn.Conv2d(width + 2, width, 1)
        self.conv = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(width, affine=False)

    def forward(self, features: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
        batch, _, height, width = features.shape
        coordinates = coordinate_maps(batch, height, width, features.device)
        entry = torch.relu(self.entry(torch.cat([features, coordinates], dim=1)))
        normalised = self.norm(self.conv(entry))
        modulated = gamma[:, :, None, None] * normalised + beta[:, :, None, None]
        return entry + torch.relu(modulated)


class FiLMNetwork(nn.Module):
    """CNN stem + FiLM-ed residual blocks conditioned on a question GRU (Perez et al. 2018)."""

    def __init__(self, config: FiLMConfig, vocabulary_size: int, answer_count: int):
        super().__init__()
        self.config = config
        self.backbone = make_backbone(config.backbone)
        if self.backbone is None:
            stem = [conv_block(3 if i == 0 else config.stem_channels, config.stem_channels, stride=2)
                    for i in range(config.stem_layers)]
            stem.append(conv_block(config.stem_channels, config.width))
            self.stem = nn.Sequential(*stem)
        else:
            self.stem = conv_block(self.backbone.channels, config.width, stride=FILM_BACKBONE_STRIDE)
        self.question = QuestionEncoder(vocabulary_size, config.word_width, config.question_width, cell="gru")
        self.film = nn.Linear(config.question_width, 2 * config.width * config.blocks)
        self.blocks = nn.ModuleList(FiLMBlock(config.width) for _ in range(config.blocks))
        self.classifier_conv = nn.Sequential(
            nn.Conv2d(config.width + 2, config.classifier_width, 1, bias=False),
            nn.BatchNorm2d(config.classifier_width),
            nn.ReLU(inplace=True),
        )
        self.classifier = nn.Sequential(
            nn.Linear(config.classifier_width, config.classifier_width), nn.ReLU(), nn.Dropout(config.dropout),
            nn.Linear(config.classifier_width, answer_count),
        )

    def image_features(self, images: torch.Tensor) -> torch.Tensor:
        """What the frozen part of the network makes of the images: the backbone's features, or the
        normalised pixels without a backbone."""
        return normalise_images(images) if self.backbone is None else self.backbone(images)

    def forward(self, images: torch.Tensor, words: torch.Tensor, image_of: torch.Tensor | None = None) -> torch.Tensor:
        """Answer logits; question q asks about images[image_of[q]] (images[q] without `image_of`)."""
        return self.answer(self.image_features(images), words, image_of)

    def answer(self, image_features: torch.Tensor, words: torch.Tensor,
               image_of: torch.Tensor | None = None) -> torch.Tensor:
        """`forward` from `image_features`' output (a trainer's cache of the frozen backbone's features)."""
        features = self.stem(image_features)  # the stem does not see the question: once per image
        if image_of is not None:
            features = features[image_of]
        parameters = self.film(self.question(words)).view(words.shape[0], self.config.blocks, 2, self.config.width)
        for index, block in enumerate(self.blocks):
            # Gamma around 1 at the start: the blocks begin as plain residual blocks.
            gamma = 1.0 + parameters[:, index, 0]
            features = block(features, gamma, parameters[:, index, 1])
        batch, _, height, width = features.shape
        coordinates = coordinate_maps(batch, height, width, features.device)
        pooled = self.classifier_conv(torch.cat([features, coordinates], dim=1)).amax(dim=(2, 3))
        return self.classifier(pooled)
