"""The pixel player file: model kind and config, weights, word / answer / program-token lists, image spec.

Like the state player file (and written with its atomic writer), a dict of
plain values and tensors loadable with `weights_only=True`. The image spec
(render preset and size) is part of the player: images are rendered with it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.text import WordVocabulary
from players.pixel.images import ImageSpec
from players.pixel.models import FiLMConfig, FiLMNetwork, PixelRelationNetwork, PixelRNConfig
from players.pixel.neuro_symbolic import NeuroSymbolicConfig, NeuroSymbolicNetwork
from players.pixel.object_transformer import ObjectTransformerConfig, ObjectTransformerNetwork
from players.state.checkpoint import (
    COMMON_FIELDS,
    check_player_dict,
    read_torch,
    write_torch_atomic,
)

FORMAT = "clevr-game-pixel-player/1"

PLAYER_KINDS: dict[str, str] = {"pixel-rn": "relation-network", "film": "film", "neuro-symbolic": "neuro-symbolic",
                                "object-transformer": "object-transformer"}
"""Player name -> model kind."""


def build_model(kind: str, config: dict[str, Any], vocabulary_size: int, answer_count: int,
                token_count: int = 0) -> nn.Module:
    """A fresh network of `kind` from a config dict; TypeError for an unknown config key."""
    if kind == "relation-network":
        return PixelRelationNetwork(PixelRNConfig(**config), vocabulary_size, answer_count)
    if kind == "film":
        return FiLMNetwork(FiLMConfig(**config), vocabulary_size, answer_count)
    if kind == "neuro-symbolic":
        return NeuroSymbolicNetwork(NeuroSymbolicConfig.from_dict(config), vocabulary_size, token_count)
    if kind == "object-transformer":
        return ObjectTransformerNetwork(ObjectTransformerConfig.from_dict(config), vocabulary_size, answer_count)
    raise InputError(f"unknown pixel model kind {kind!r} (expected one of {', '.join(PLAYER_KINDS.values())})")


def config_dict(model: nn.Module) -> dict[str, Any]:
    return asdict(model.config)


@dataclass
class PixelPlayerFile:
    kind: str
    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    words: list[str]
    answers: list[str]
    image: ImageSpec
    program_tokens: list[str] = field(default_factory=list)
    fallback: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def vocabulary(self) -> WordVocabulary:
        return WordVocabulary(self.words[2:])

    def build(self, device: torch.device | str = "cpu") -> nn.Module:
        """The network with these weights, in eval mode on `device`."""
        model = build_model(self.kind, self.config, len(self.words), len(self.answers), len(self.program_tokens))
        model.load_state_dict(self.state_dict)
        return model.to(device).eval()


def player_file_from(model: nn.Module, kind: str, vocabulary: WordVocabulary, answers: list[str], image: ImageSpec,
                     *, program_tokens: list[str] | None = None, fallback: dict[str, str] | None = None,
                     info: dict[str, Any] | None = None) -> PixelPlayerFile:
    state = {name: tensor.detach().to("cpu").clone() for name, tensor in model.state_dict().items()}
    return PixelPlayerFile(kind, config_dict(model), state, list(vocabulary.words), list(answers), image,
                           list(program_tokens or []), dict(fallback or {}), dict(info or {}))


def to_dict(player_file: PixelPlayerFile) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "kind": player_file.kind,
        "config": player_file.config,
        "state_dict": player_file.state_dict,
        "words": player_file.words,
        "answers": player_file.answers,
        "image": player_file.image.as_dict(),
        "program_tokens": player_file.program_tokens,
        "fallback": player_file.fallback,
        "info": player_file.info,
    }


def from_dict(data: Any, source: str) -> PixelPlayerFile:
    """Check a loaded dict; InputError naming the file and the field that is wrong."""
    data = check_player_dict(data, source, FORMAT, "pixel player",
                             COMMON_FIELDS + (("program_tokens", list), ("fallback", dict)))
    if data["kind"] not in PLAYER_KINDS.values():
        raise InputError(f"{source}: unknown model kind {data['kind']!r}")
    if data["kind"] == "neuro-symbolic" and not data["program_tokens"]:
        raise InputError(f"{source}: a neuro-symbolic player file needs 'program_tokens'")
    return PixelPlayerFile(
        data["kind"], data["config"], data["state_dict"], data["words"], data["answers"],
        ImageSpec.from_dict(data.get("image"), source), data["program_tokens"], data["fallback"], data["info"],
    )


def save_player_file(path: str | os.PathLike[str], player_file: PixelPlayerFile) -> None:
    write_torch_atomic(path, to_dict(player_file))


def load_player_file(path: str | os.PathLike[str]) -> PixelPlayerFile:
    """A pixel player file, or the player inside a training checkpoint; InputError (one line) otherwise."""
    data = read_torch(path, "pixel player file")
    if isinstance(data, dict) and "player" in data and "format" not in data:
        data = data["player"]
    return from_dict(data, str(path))
