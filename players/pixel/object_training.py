"""Training of the `object-transformer`: the reasoning transformer learns on frozen detections.

The perception is copied from a neuro-symbolic player file when a run starts
fresh (by default the shipped `players/weights/neuro-symbolic.pt`) and stays
frozen, so every image's detections are computed once, before the first step,
and each step trains only the transformer: cross-entropy on the answer.

With `--init STATE_TRANSFORMER_FILE` a fresh run starts the transformer from a
state transformer's weights instead of random ones: its architecture, word
list, layers and answer head, its position encoding, and its attribute
embeddings as the weights of the soft attribute encoding (a one-hot
distribution gives exactly the embedding). The slot inputs the state
transformer has no counterpart for (objectness score, CNN feature) start at
zero, so before the first step the network answers as the state transformer
would on the perceived scene, and training adapts it to what perception misses.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC
from players.pixel.checkpoint import load_player_file
from players.pixel.data import PixelData
from players.pixel.object_transformer import (
    ObjectTokens,
    ObjectTransformerNetwork,
    perception_state,
)
from players.pixel.perception import PERCEIVED_VOCABULARY
from players.state.checkpoint import PlayerFile, shipped_path
from players.state.checkpoint import load_player_file as load_state_player_file
from players.state.features import ANSWERS, MAX_OBJECTS
from players.state.training import FamilyScores, with_new_words

DEFAULT_PERCEPTION_FILE = "neuro-symbolic.pt"
"""The shipped player file whose perception a fresh object-transformer starts from."""


def perception_source(path: str | os.PathLike[str] | None) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(perception config, perception weights) of a neuro-symbolic player file (default: the shipped one)."""
    source = shipped_path(DEFAULT_PERCEPTION_FILE) if path is None else path
    player_file = load_player_file(source)
    if player_file.kind != "neuro-symbolic":
        raise InputError(f"{source}: holds a {player_file.kind!r} model; the object-transformer takes its "
                         "perception from a 'neuro-symbolic' player file")
    return dict(player_file.config["perception"]), perception_state(player_file.state_dict)


_SHARED_WITH_STATE_TRANSFORMER = ("width", "layers", "heads", "feedforward", "fourier_bands", "dropout",
                                  "relation_bias")


def reasoning_source(path: str | os.PathLike[str]) -> PlayerFile:
    """The state-transformer player file a fresh object-transformer starts its reasoning from (`--init`)."""
    initial = load_state_player_file(path)
    if initial.kind != "transformer":
        raise InputError(f"--init {path}: holds a {initial.kind!r} model; the object-transformer starts from a "
                         "state-transformer file ('transformer')")
    return initial


def start_config(model_config: dict[str, Any], perception_config: dict[str, Any],
                 initial: PlayerFile | None) -> dict[str, Any]:
    """The config of a fresh run: `model_config` with the perception's config, and the --init file's
    architecture when there is one (the copied weights must fit); InputError for a --config that differs."""
    fixed = {"perception": perception_config}
    if initial is not None:
        fixed.update({key: initial.config[key] for key in _SHARED_WITH_STATE_TRANSFORMER}, slots=MAX_OBJECTS)
    differing = sorted(key for key, value in fixed.items() if key in model_config and model_config[key] != value)
    if differing:
        raise InputError(f"--config: {', '.join(differing)} differ from the files the object-transformer starts "
                         "from (the neuro-symbolic perception, the --init state transformer); leave them out")
    return {**model_config, **fixed}


def reasoning_weights(model: ObjectTransformerNetwork, state: dict[str, torch.Tensor],
                      vocabulary_size: int) -> dict[str, torch.Tensor]:
    """A state transformer's state dict as `model`'s reasoning weights (all but the perception; see the module doc)."""
    state = with_new_words(state, vocabulary_size)
    shared = {name: tensor for name, tensor in state.items() if not name.startswith("objects.")}
    columns = [state[f"objects.attributes.{index}.weight"][[CLEVR_POC.index(attribute, value)
                                                             for value in PERCEIVED_VOCABULARY.values(attribute)]]
               for index, attribute in enumerate(ATTRIBUTES)]
    slots = model.slots
    return {
        **shared,
        "slots.position.weight": state["objects.position.weight"],
        "slots.position.bias": state["objects.position.bias"],
        "slots.attributes.weight": torch.cat(columns).T.contiguous(),
        "slots.appearance.weight": torch.zeros_like(slots.appearance.weight),
        "slots.appearance.bias": torch.zeros_like(slots.appearance.bias),
        "slots.score.weight": torch.zeros_like(slots.score.weight),
        "slots.empty": state["objects.empty"],
    }


def start_weights(model: ObjectTransformerNetwork, perception: dict[str, torch.Tensor],
                  initial: PlayerFile | None, vocabulary_size: int) -> None:
    """Load the frozen perception, and the --init state transformer's reasoning weights when given."""
    model.perception.load_state_dict(perception)
    if initial is None:
        return
    missing, unexpected = model.load_state_dict(reasoning_weights(model, initial.state_dict, vocabulary_size),
                                                strict=False)
    assert not unexpected and all(name.startswith("perception.") for name in missing), (missing, unexpected)


def fresh_network(model_config: dict[str, Any], vocabulary_size: int) -> ObjectTransformerNetwork:
    """An object-transformer as a fresh run without --init starts it: random reasoning weights and the shipped
    neuro-symbolic perception, frozen."""
    from players.pixel.checkpoint import build_model

    perception_config, perception_weights = perception_source(None)
    model = build_model("object-transformer", start_config(model_config, perception_config, None), vocabulary_size,
                        len(ANSWERS))
    start_weights(model, perception_weights, None, vocabulary_size)
    return model


def detections_key(model: ObjectTransformerNetwork) -> str:
    """What `model`'s detections of an image depend on: its frozen perception's weights and its slot count."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.perception.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return f"{digest.hexdigest()[:16]}-{model.config.slots}slots"


class ObjectTransformerTask:
    """Cross-entropy on the answer from cached detections; the same per-family evaluation as the others."""

    def __init__(self, model: ObjectTransformerNetwork, device: torch.device, detect_batch: int = 128):
        self.model, self.device, self.detect_batch = model, device, detect_batch
        self._detections: dict[int, tuple[PixelData, ObjectTokens]] = {}  # the data kept so its id stays its own
        self._key: str | None = None

    @property
    def key(self) -> str:
        """`detections_key` of the model, taken once: the perception does not learn."""
        if self._key is None:
            self._key = detections_key(self.model)
        return self._key

    def detections(self, data: PixelData) -> ObjectTokens:
        """Every image's detections: `data.detections`' when they are this perception's, else computed on
        first use (the perception is frozen). An image's detections depend on its batch only by float rounding
        (3e-7 at most, measured: batches under 64 images take other kernels)."""
        if id(data) not in self._detections:
            known = data.detections.get(self.key)
            self._detections[id(data)] = (data, known.to(self.device) if known is not None else self._detect(data))
        return self._detections[id(data)][1]

    def remember_detections(self, data: PixelData) -> None:
        """Keep every image's detections in `data.detections`, for the parts `select_scenes` cuts from it."""
        data.detections[self.key] = self.detections(data)

    def _detect(self, data: PixelData) -> ObjectTokens:
        was_training = self.model.training
        self.model.eval()
        # Ordinary tensors even when first asked for during an evaluation: training steps read them too.
        with torch.inference_mode(False), torch.no_grad():
            parts = [self.model.detect(data.images[start : start + self.detect_batch].to(self.device))
                     for start in range(0, len(data.images), self.detect_batch)]
        self.model.train(was_training)
        return ObjectTokens(*(torch.cat(columns) for columns in zip(*parts, strict=True)))

    def _logits(self, data: PixelData, indices: torch.Tensor) -> torch.Tensor:
        tokens = self.detections(data).select(data.questions.scene_of[indices].to(self.device))
        longest = max(int(data.questions.lengths[indices].max()), 1)
        words = data.questions.words[indices, :longest].long().to(self.device)
        return self.model.reason(tokens, words)

    def loss(self, data: PixelData, indices: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        answers = data.questions.answers[indices].to(self.device)
        return nn.functional.cross_entropy(self._logits(data, indices), answers), {}

    @torch.inference_mode()
    def evaluate(self, data: PixelData, limit: int | None = None, batch_size: int = 512) -> tuple[FamilyScores, dict]:
        self.model.eval()
        count = min(len(data), limit or len(data))
        order = torch.argsort(data.questions.lengths[:count], stable=True)  # similar lengths: less padding
        correct = torch.zeros(count, dtype=torch.bool)
        for start in range(0, count, batch_size):
            indices = order[start : start + batch_size]
            predicted = self._logits(data, indices).argmax(dim=1).cpu()
            correct[indices] = predicted == data.questions.answers[indices]
        scores = FamilyScores()
        for family_id, name in enumerate(data.questions.family_names):
            members = data.questions.families[:count] == family_id
            if bool(members.any()):
                scores.add(name, int(correct[members].sum()), int(members.sum()))
        return scores, {}
