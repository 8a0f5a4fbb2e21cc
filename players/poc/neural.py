"""`poc-neural`: the CLEVR-POC paper's CLIP-style baseline, trained from scratch on this machine.

No pretrained CLIP is available offline, so every encoder starts from random
weights. The paper's model embeds the image, the question and the constraints
and fuses them; here the scene comes as its state (each visible object's
attributes, region and ground position: the scene encoder a small
transformer), which spares the baseline the perception errors a pixel encoder
would add. The question is a bidirectional GRU over its words; the
constraints (variants as in the paper):

- `none`: no knowledge of the environment;
- `nl`: its English sentences, a GRU over their words;
- `asp`: its ASP constraint lines, a GRU over their tokens.

The fused vector gives one sigmoid per CLEVR-POC attribute value (17), trained
with a binary cross-entropy on the asked attribute's values, positives weighted
by how rare they are. The answer set is the asked attribute's values whose
probability passes a threshold tuned on validation items (the best value if
none does: a set answer is never empty).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from clevr_game.asp.regions import regions_of
from clevr_game.errors import InputError
from clevr_game.scene import Scene
from clevr_game.text import WordVocabulary, tokenize
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC
from players.poc.data import PocExample
from players.poc.language import (
    asked_attribute,
    asp_tokens,
    asp_words,
    attribute_values,
    question_words,
    sentence_words,
    sentences_of,
)

KNOWLEDGE_KINDS = ("none", "nl", "asp")
MAX_VISIBLE = 9
QUESTION_LENGTH = 40
KNOWLEDGE_LENGTH = {"none": 1, "nl": 220, "asp": 600}
OUTPUTS = attribute_values()
_OUTPUT_INDEX = {pair: k for k, pair in enumerate(OUTPUTS)}
_ATTRIBUTE_MASKS = {a: np.array([attribute == a for attribute, _ in OUTPUTS]) for a in ATTRIBUTES}


@dataclass(frozen=True)
class NeuralConfig:
    knowledge: str = "none"
    width: int = 96
    word_width: int = 48
    scene_layers: int = 2

    def __post_init__(self) -> None:
        if self.knowledge not in KNOWLEDGE_KINDS:
            raise InputError(f"knowledge {self.knowledge!r}: expected one of {', '.join(KNOWLEDGE_KINDS)}")


def knowledge_words(kind: str) -> WordVocabulary:
    return {"none": lambda: WordVocabulary([]), "nl": sentence_words, "asp": asp_words}[kind]()


def knowledge_ids(kind: str, environment: str, words: WordVocabulary) -> np.ndarray:
    length = KNOWLEDGE_LENGTH[kind]
    if kind == "none":
        return np.zeros(length, dtype=np.int64)
    tokens = tokenize(sentences_of(environment)) if kind == "nl" else asp_tokens(environment)
    ids = [words.ids.get(t, 1) for t in tokens][:length]
    out = np.zeros(length, dtype=np.int64)
    out[: len(ids)] = ids
    return out


class _Sequence(nn.Module):
    """Embedding + bidirectional GRU, mean-pooled over the real tokens."""

    def __init__(self, vocabulary: int, word_width: int, width: int):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, word_width, padding_idx=0)
        self.gru = nn.GRU(word_width, width // 2, batch_first=True, bidirectional=True)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids != 0).unsqueeze(-1).float()
        outputs, _ = self.gru(self.embed(ids))
        return (outputs * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class PocNeuralNetwork(nn.Module):
    def __init__(self, config: NeuralConfig, question_vocabulary: int, knowledge_vocabulary: int):
        super().__init__()
        self.config = config
        width = config.width
        self.attribute_embeddings = nn.ModuleList(nn.Embedding(len(CLEVR_POC.values(a)), width) for a in ATTRIBUTES)
        self.region = nn.Embedding(4, width)
        self.position = nn.Linear(2, width)
        layer = nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.scene = nn.TransformerEncoder(layer, config.scene_layers, enable_nested_tensor=False)
        self.question = _Sequence(question_vocabulary, config.word_width, width)
        self.knowledge = (_Sequence(knowledge_vocabulary, config.word_width, width)
                          if config.knowledge != "none" else None)
        fused = 3 * width + (width if self.knowledge is not None else 0)
        self.head = nn.Sequential(nn.Linear(fused, 2 * width), nn.ReLU(), nn.Linear(2 * width, 2 * width), nn.ReLU(),
                                  nn.Linear(2 * width, len(OUTPUTS)))

    def forward(self, attributes: torch.Tensor, regions: torch.Tensor, positions: torch.Tensor, present: torch.Tensor,
                question: torch.Tensor, knowledge: torch.Tensor) -> torch.Tensor:
        tokens = self.region(regions) + self.position(positions)
        for k, embedding in enumerate(self.attribute_embeddings):
            tokens = tokens + embedding(attributes[..., k])
        encoded = self.scene(tokens, src_key_padding_mask=~present)
        weights = present.unsqueeze(-1).float()
        pooled = (encoded * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        asked = self.question(question)
        parts = [pooled, asked, pooled * asked]
        if self.knowledge is not None:
            # Items of one environment share its constraints: encode each distinct text once per batch.
            distinct, inverse = torch.unique(knowledge, dim=0, return_inverse=True)
            parts.append(self.knowledge(distinct)[inverse])
        return self.head(torch.cat(parts, dim=-1))


@dataclass
class Batch:
    attributes: torch.Tensor
    regions: torch.Tensor
    positions: torch.Tensor
    present: torch.Tensor
    question: torch.Tensor
    knowledge: torch.Tensor

    def inputs(self) -> tuple[torch.Tensor, ...]:
        return (self.attributes, self.regions, self.positions, self.present, self.question, self.knowledge)


class NeuralEncoder:
    """Turns scenes, questions and environments into the network's tensors."""

    def __init__(self, knowledge: str) -> None:
        self.kind = knowledge
        self.question_words = question_words()
        self.knowledge_words = knowledge_words(knowledge)
        self._knowledge_cache: dict[str, np.ndarray] = {}

    def batch(self, scenes: Sequence[Scene], questions: Sequence[str], environments: Sequence[str]) -> Batch:
        count = len(scenes)
        attributes = np.zeros((count, MAX_VISIBLE, len(ATTRIBUTES)), dtype=np.int64)
        regions = np.zeros((count, MAX_VISIBLE), dtype=np.int64)
        positions = np.zeros((count, MAX_VISIBLE, 2), dtype=np.float32)
        present = np.zeros((count, MAX_VISIBLE), dtype=bool)
        for row, scene in enumerate(scenes):
            objects = scene.objects[:MAX_VISIBLE]
            if not objects:
                continue
            n = len(objects)
            coords = scene.coords()[:n]
            attributes[row, :n] = [[CLEVR_POC.index(a, o.attribute(a)) for a in ATTRIBUTES] for o in objects]
            regions[row, :n] = regions_of(coords, scene.directions)
            positions[row, :n] = coords[:, :2] / 3.0
            present[row, :n] = True
        question = np.stack([self.question_words.encode(q, QUESTION_LENGTH) for q in questions])
        knowledge = np.stack([self._knowledge(e) for e in environments])
        return Batch(*(torch.from_numpy(x) for x in (attributes, regions, positions, present, question, knowledge)))

    def _knowledge(self, environment: str) -> np.ndarray:
        ids = self._knowledge_cache.get(environment)
        if ids is None:
            ids = self._knowledge_cache[environment] = knowledge_ids(self.kind, environment, self.knowledge_words)
        return ids


def targets_of(examples: Sequence[PocExample]) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-hot answers (B, 17) and the mask of the asked attribute's outputs (B, 17)."""
    targets = np.zeros((len(examples), len(OUTPUTS)), dtype=np.float32)
    masks = np.zeros((len(examples), len(OUTPUTS)), dtype=bool)
    for row, example in enumerate(examples):
        masks[row] = _ATTRIBUTE_MASKS[example.query_attribute]
        for value in example.answer:
            targets[row, _OUTPUT_INDEX[(example.query_attribute, value)]] = 1.0
    return torch.from_numpy(targets), torch.from_numpy(masks)


def positive_weights(examples: Sequence[PocExample]) -> torch.Tensor:
    """Per output, negatives over positives among items asking its attribute (rare values weigh more)."""
    targets, masks = targets_of(examples)
    positives = (targets * masks).sum(0)
    negatives = ((1 - targets) * masks).sum(0)
    return (negatives / positives.clamp(min=1.0)).clamp(min=1.0, max=20.0)


def predicted_sets(probabilities: np.ndarray, attributes: Sequence[str | None], threshold: float) -> list[list[str]]:
    """The asked attribute's values above `threshold` (its best value when none is)."""
    out = []
    for row, attribute in zip(probabilities, attributes, strict=True):
        if attribute is None:
            out.append([])
            continue
        indices = np.flatnonzero(_ATTRIBUTE_MASKS[attribute])
        chosen = [k for k in indices if row[k] > threshold] or [int(indices[np.argmax(row[indices])])]
        out.append(sorted(OUTPUTS[k][1] for k in chosen))
    return out


def tune_threshold(probabilities: np.ndarray, examples: Sequence[PocExample]) -> tuple[float, float]:
    """The threshold (0.05 .. 0.95) with the best exact accuracy on `examples`, and that accuracy."""
    best = (0.5, -1.0)
    attributes = [e.query_attribute for e in examples]
    for threshold in np.round(np.arange(0.05, 0.96, 0.05), 2).tolist():
        sets = predicted_sets(probabilities, attributes, threshold)
        accuracy = float(np.mean([tuple(s) == e.answer for s, e in zip(sets, examples, strict=True)]))
        if accuracy > best[1]:
            best = (threshold, accuracy)
    return best


def attribute_of_question(question: str) -> str | None:
    return asked_attribute(question)


def config_dict(config: NeuralConfig) -> dict:
    return asdict(config)
