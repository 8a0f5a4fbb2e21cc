"""The state-input networks: a transformer over object and word tokens, a relation network, and the
question-only floor (`blind`).

All read the same batch (`StateBatch`): object positions, attribute ids and
presence from `players.state.features`, and question word ids; all return
logits over the answer classes (the question-only network reads the words alone). A config is a plain dataclass so a checkpoint
stores it as a dict.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import torch
from torch import nn

from clevr_game.scene import RELATION_THRESHOLD
from players.state.features import (
    ATTRIBUTE_TABLE_SIZES,
    MAX_OBJECTS,
    MAX_QUESTION_TOKENS,
    POSITION_SCALE,
)

RELATION_CODES = 9
"""Pairwise spatial codes: (left of / neither / right of) x (in front of / neither / behind)."""


class StateBatch(NamedTuple):
    """positions (B, 10, 2) float, attributes (B, 10, 4) long, present (B, 10) bool, words (B, L) long."""

    positions: torch.Tensor
    attributes: torch.Tensor
    present: torch.Tensor
    words: torch.Tensor

    def to(self, device: torch.device | str) -> StateBatch:
        return StateBatch(*(t.to(device, non_blocking=True) for t in self))


@dataclass(frozen=True)
class TransformerConfig:
    width: int = 96
    layers: int = 5
    heads: int = 4
    feedforward: int = 192
    fourier_bands: int = 6
    dropout: float = 0.0
    relation_bias: bool = True


@dataclass(frozen=True)
class RelationNetworkConfig:
    width: int = 256
    word_width: int = 64
    question_width: int = 128
    g_layers: int = 4
    f_width: int = 256
    fourier_bands: int = 6
    dropout: float = 0.1
    relation_codes: bool = True
    g_activation: str = "relu"
    """"relu" or "leaky_relu" (slope 0.01): a leaky unit still gets a gradient when it is negative on every pair."""
    g_norm: str = "none"
    """"none" or "layer": a layer norm (per pair, over the width) before each of g's activations, so a pair's
    pre-activations have zero mean and unit spread before the learned gain and bias and cannot all drift negative
    together (half of the shipped network's last g layer is dead: negative on every pair)."""

    def __post_init__(self) -> None:
        # TypeError, as for an unknown key, so `players train` reports a bad --config in one line.
        if self.g_activation not in G_ACTIVATIONS:
            raise TypeError(f"g_activation {self.g_activation!r} (expected one of {', '.join(G_ACTIVATIONS)})")
        if self.g_norm not in G_NORMS:
            raise TypeError(f"g_norm {self.g_norm!r} (expected one of {', '.join(G_NORMS)})")


G_ACTIVATIONS = ("relu", "leaky_relu")
G_NORMS = ("none", "layer")
OPTIONAL_RELATION_KEYS = ("g_activation", "g_norm")
"""Relation-network keys a player file stores only when they differ from the default, so a file of the default
network reads exactly as one written before these options existed (and older code can still load it)."""


def relation_codes(positions: torch.Tensor) -> torch.Tensor:
    """(B, N, N) codes in 0..8: where object j lies from object i, by CLEVR's 0.2 margin rule.

    Positions are already in the camera's ground frame (right, behind), so each
    of CLEVR's relations is one coordinate difference against the threshold.
    """
    delta = positions.unsqueeze(1) - positions.unsqueeze(2)  # delta[b, i, j] = p_j - p_i
    threshold = RELATION_THRESHOLD / POSITION_SCALE
    sides = (delta > threshold).long() - (delta < -threshold).long() + 1  # 0, 1, 2 per axis
    return sides[..., 0] * 3 + sides[..., 1]


class RelationBiasedLayer(nn.Module):
    """A pre-norm transformer encoder layer whose object-to-object attention gets a learned
    per-head bias for each spatial relation code (a relative position encoding for scenes)."""

    def __init__(self, width: int, heads: int, feedforward: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.attention_norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.attention_out = nn.Linear(width, width)
        self.feedforward_norm = nn.LayerNorm(width)
        self.feedforward = nn.Sequential(nn.Linear(width, feedforward), nn.GELU(), nn.Linear(feedforward, width))
        self.dropout = nn.Dropout(dropout)
        self.relation_bias = nn.Embedding(RELATION_CODES, heads)
        nn.init.zeros_(self.relation_bias.weight)

    def forward(self, tokens: torch.Tensor, key_bias: torch.Tensor, codes: torch.Tensor | None,
                objects: slice) -> torch.Tensor:
        batch_size, length, width = tokens.shape
        qkv = self.qkv(self.attention_norm(tokens)).view(batch_size, length, 3, self.heads, width // self.heads)
        query, key, value = qkv.permute(2, 0, 3, 1, 4)
        bias = key_bias.expand(batch_size, self.heads, length, length)
        if codes is not None:
            bias = bias.clone()
            bias[:, :, objects, objects] += self.relation_bias(codes).permute(0, 3, 1, 2)
        attended = nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=bias, dropout_p=self.dropout.p if self.training else 0.0
        )
        tokens = tokens + self.dropout(self.attention_out(attended.transpose(1, 2).reshape(batch_size, length, width)))
        return tokens + self.dropout(self.feedforward(self.feedforward_norm(tokens)))


class ObjectEncoder(nn.Module):
    """One vector per object slot: Fourier-featured position + summed attribute embeddings.

    Sine and cosine bands of the position let a small network resolve the 0.2
    world-unit margin of CLEVR's relations; an empty slot gets a learned token.
    """

    def __init__(self, width: int, fourier_bands: int):
        super().__init__()
        self.register_buffer(
            "frequencies", math.pi * (2.0 ** torch.arange(fourier_bands, dtype=torch.float32)), persistent=False
        )
        self.position = nn.Linear(2 + 4 * fourier_bands, width)
        self.attributes = nn.ModuleList(nn.Embedding(size, width) for size in ATTRIBUTE_TABLE_SIZES)
        self.empty = nn.Parameter(torch.zeros(width))
        nn.init.normal_(self.empty, std=0.02)

    def forward(self, positions: torch.Tensor, attributes: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        angles = positions.unsqueeze(-1) * self.frequencies  # (B, N, 2, bands)
        fourier = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(-2)
        encoded = self.position(torch.cat([positions, fourier], dim=-1))
        for index, table in enumerate(self.attributes):
            encoded = encoded + table(attributes[..., index])
        return torch.where(present.unsqueeze(-1), encoded, self.empty)


class StateTransformer(nn.Module):
    """[answer token, 10 object tokens, question words] -> pre-norm transformer encoder -> answer logits.

    With `relation_bias`, attention between two objects adds a learned per-head
    bias for their spatial relation code, so relational questions need not
    rediscover CLEVR's left/right/front/behind rule from raw coordinates.
    """

    TYPE_ANSWER, TYPE_OBJECT, TYPE_WORD = 0, 1, 2

    def __init__(self, config: TransformerConfig, vocabulary_size: int, answer_count: int):
        super().__init__()
        self.config = config
        width = config.width
        self.objects = ObjectEncoder(width, config.fourier_bands)
        self.words = nn.Embedding(vocabulary_size, width, padding_idx=0)
        self.word_positions = nn.Embedding(MAX_QUESTION_TOKENS, width)
        self.types = nn.Embedding(3, width)
        self.answer_token = nn.Parameter(torch.zeros(width))
        self.layers = nn.ModuleList(
            RelationBiasedLayer(width, config.heads, config.feedforward, config.dropout) for _ in range(config.layers)
        )
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, answer_count))

    def forward(self, batch: StateBatch) -> torch.Tensor:
        batch_size, length = batch.words.shape
        objects = self.objects(batch.positions, batch.attributes, batch.present) + self.types.weight[self.TYPE_OBJECT]
        steps = torch.arange(length, device=batch.words.device)
        words = self.words(batch.words) + self.word_positions(steps) + self.types.weight[self.TYPE_WORD]
        answer = (self.answer_token + self.types.weight[self.TYPE_ANSWER]).expand(batch_size, 1, -1)
        tokens = torch.cat([answer, objects, words], dim=1)
        # Only word padding is hidden; empty object slots stay visible as the empty token.
        key_bias = torch.zeros(batch_size, 1, 1, tokens.shape[1], device=tokens.device)
        key_bias[:, 0, 0, 1 + MAX_OBJECTS :] = torch.where(batch.words == 0, float("-inf"), 0.0)
        codes = relation_codes(batch.positions) if self.config.relation_bias else None
        object_slots = slice(1, 1 + MAX_OBJECTS)
        for layer in self.layers:
            tokens = layer(tokens, key_bias, codes, object_slots)
        return self.head(tokens[:, 0])


class StateRelationNetwork(nn.Module):
    """Santoro et al. 2017, state input: f(sum over object pairs of g(o_i, o_j, q)).

    The question is the last state of an LSTM over the words; with
    `relation_codes`, each pair also sees its spatial relation code. g's first layer is
    linear in the concatenation [o_i, o_j, q], so it is computed as three
    projections broadcast over the pairs (same function, a tenth of the work).
    Pairs with an empty slot are left out of the sum.
    """

    def __init__(self, config: RelationNetworkConfig, vocabulary_size: int, answer_count: int):
        super().__init__()
        self.config = config
        width = config.width
        self.objects = ObjectEncoder(width, config.fourier_bands)
        self.words = nn.Embedding(vocabulary_size, config.word_width, padding_idx=0)
        self.question = nn.LSTM(config.word_width, config.question_width, batch_first=True)
        self.first_i = nn.Linear(width, width, bias=False)
        self.first_j = nn.Linear(width, width, bias=False)
        self.first_q = nn.Linear(config.question_width, width)
        self.first_relation = nn.Embedding(RELATION_CODES, width) if config.relation_codes else None
        self.g_rest = self._g_rest(config)
        self.f = nn.Sequential(
            nn.Linear(width, config.f_width), nn.ReLU(),
            nn.Linear(config.f_width, config.f_width), nn.ReLU(), nn.Dropout(config.dropout),
            nn.Linear(config.f_width, answer_count),
        )

    @staticmethod
    def _g_rest(config: RelationNetworkConfig) -> nn.Sequential:
        """g after its first layer: (norm, activation, linear) repeated, then (norm, activation).

        With the defaults this is [ReLU, Linear, ..., ReLU] with the same module indices as before the options
        existed, so the shipped state dicts load; layer norms and leaky ReLUs draw no random numbers, so a seeded
        initialisation gives the same linear weights with or without them.
        """
        width = config.width

        def activation() -> list[nn.Module]:
            norm: list[nn.Module] = [nn.LayerNorm(width)] if config.g_norm == "layer" else []
            return [*norm, nn.LeakyReLU() if config.g_activation == "leaky_relu" else nn.ReLU()]

        rest: list[nn.Module] = []
        for _ in range(config.g_layers - 1):
            rest += [*activation(), nn.Linear(width, width)]
        return nn.Sequential(*rest, *activation())

    def encode_question(self, words: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.question(self.words(words))
        # The LSTM runs forward only, so its output at the last real word ignores the padding after it.
        last = ((words != 0).sum(dim=1) - 1).clamp(min=0)
        return outputs[torch.arange(words.shape[0], device=words.device), last]

    def relations(self, batch: StateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(sum over object pairs of g (B, width), object encodings (B, N, width)): all but f.

        The adversary reads these as its features (agents.features).
        """
        objects = self.objects(batch.positions, batch.attributes, batch.present)
        question = self.encode_question(batch.words)
        first = (
            self.first_i(objects).unsqueeze(2)
            + self.first_j(objects).unsqueeze(1)
            + self.first_q(question)[:, None, None, :]
        )
        if self.first_relation is not None:
            first = first + self.first_relation(relation_codes(batch.positions))
        pairs = self.g_rest(first)  # (B, N, N, width)
        both_present = (batch.present.unsqueeze(2) & batch.present.unsqueeze(1)).unsqueeze(-1)
        return (pairs * both_present).sum(dim=(1, 2)), objects

    def forward(self, batch: StateBatch) -> torch.Tensor:
        return self.f(self.relations(batch)[0])


@dataclass(frozen=True)
class QuestionOnlyConfig:
    word_width: int = 64
    question_width: int = 128
    hidden: int = 256
    dropout: float = 0.1


class QuestionOnlyNetwork(nn.Module):
    """The question alone: an LSTM over the words, then an MLP (CLEVR's "LSTM" baseline, Johnson et al. 2017).

    It is the floor of every accuracy table: what a player gets from the wording and
    the answer priors without looking. The object fields of the batch are never read,
    so no scene can change an answer.
    """

    def __init__(self, config: QuestionOnlyConfig, vocabulary_size: int, answer_count: int):
        super().__init__()
        self.config = config
        self.words = nn.Embedding(vocabulary_size, config.word_width, padding_idx=0)
        self.question = nn.LSTM(config.word_width, config.question_width, batch_first=True)
        self.head = nn.Sequential(
            nn.Linear(config.question_width, config.hidden), nn.ReLU(), nn.Dropout(config.dropout),
            nn.Linear(config.hidden, answer_count),
        )

    def forward(self, batch: StateBatch) -> torch.Tensor:
        words = batch.words
        outputs, _ = self.question(self.words(words))
        # Forward-only LSTM: its output at the last real word has not seen the padding after it.
        last = ((words != 0).sum(dim=1) - 1).clamp(min=0)
        return self.head(outputs[torch.arange(words.shape[0], device=words.device), last])


KINDS: dict[str, tuple[type[nn.Module], type]] = {
    "transformer": (StateTransformer, TransformerConfig),
    "relation-network": (StateRelationNetwork, RelationNetworkConfig),
    "question-only": (QuestionOnlyNetwork, QuestionOnlyConfig),
}


def build_model(kind: str, config: dict[str, Any], vocabulary_size: int, answer_count: int) -> nn.Module:
    """A fresh network of `kind` ('transformer', 'relation-network' or 'question-only') from a config dict."""
    try:
        model_class, config_class = KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown model kind {kind!r} (expected one of {', '.join(KINDS)})") from None
    return model_class(config_class(**config), vocabulary_size, answer_count)


def config_dict(model: nn.Module) -> dict[str, Any]:
    """The model's config as a dict; a relation network's optional keys only where they differ from the default."""
    config = asdict(model.config)
    if isinstance(model.config, RelationNetworkConfig):
        defaults = RelationNetworkConfig()
        for key in OPTIONAL_RELATION_KEYS:
            if config[key] == getattr(defaults, key):
                del config[key]
    return config


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
