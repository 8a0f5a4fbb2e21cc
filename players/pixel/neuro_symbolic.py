"""The neuro-symbolic pipeline (after Yi et al. 2018): perceive the scene, parse the question, execute.

`NeuroSymbolicNetwork` holds the two learned parts (perception and parser);
`answer_questions` runs the whole pipeline on a batch: perceived objects
become `SceneFacts` (attributes and relations from the perceived world
coordinates) and the parsed program runs on them with
`clevr_game.programs.execute`, the game's own executor. A program with no
answer on the perceived scene (e.g. `unique` of two objects) gets the most
frequent training answer of its kind of question (the program's last
function), since a VQA player always answers.

Before falling back, the pipeline repairs what it saw (`PerceivedAlternatives`):
a CLEVR question presupposes its scene (each `unique` names exactly one
object), so a program with no answer on the perceived scene points at a
perception mistake. The likeliest single edits of the perceived scene (drop a
detection, add a peak just under the threshold, give one attribute of one
object its second-best value), cheapest first by the network's own scores,
are tried until the program has an answer. An answer that the program has on
the scene as first perceived is never changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.programs import INVALID_ANSWER, Program, SceneFacts, execute
from clevr_game.scene import DEFAULT_DIRECTIONS
from players.pixel.parser import ParserConfig, ProgramParser
from players.pixel.perception import (
    ATTRIBUTE_SIZES,
    MAX_PERCEIVED,
    PERCEIVED_VOCABULARY,
    STRIDE,
    PerceivedScene,
    PerceptionConfig,
    PerceptionMaps,
    PerceptionNetwork,
    decode_maps,
)
from players.pixel.program_tokens import decode_ids
from players.pixel.projection import ground_points

_DIRECTIONS = dict(DEFAULT_DIRECTIONS)


@dataclass(frozen=True)
class NeuroSymbolicConfig:
    perception: PerceptionConfig = field(default_factory=PerceptionConfig)
    parser: ParserConfig = field(default_factory=ParserConfig)
    repair: bool = True
    """Try the likeliest single edits of the perceived scene when the program has no answer on it."""
    candidate_threshold: float = 0.1
    """Heatmap peaks between this and the perception threshold may be added by a repair."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NeuroSymbolicConfig:
        unknown = set(data) - {"perception", "parser", "repair", "candidate_threshold"}
        if unknown:
            raise TypeError(f"unexpected config keys {sorted(unknown)} (expected 'perception', 'parser', "
                            f"'repair' and 'candidate_threshold')")
        return cls(PerceptionConfig(**data.get("perception", {})), ParserConfig(**data.get("parser", {})),
                   bool(data.get("repair", True)), float(data.get("candidate_threshold", 0.1)))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class NeuroSymbolicNetwork(nn.Module):
    """Perception network and question parser, trained side by side and stored as one player file."""

    def __init__(self, config: NeuroSymbolicConfig, vocabulary_size: int, token_count: int):
        super().__init__()
        self.config = config
        self.perception = PerceptionNetwork(config.perception)
        self.parser = ProgramParser(config.parser, vocabulary_size, token_count)


NEW_TOKEN_BIAS_MARGIN = 5.0
"""A program token added by fine-tuning starts with its output bias this far below the lowest known one."""


def grown_state(state_dict: dict[str, torch.Tensor], vocabulary_size: int, token_count: int) -> dict[str, torch.Tensor]:
    """A neuro-symbolic state dict whose parser reads `vocabulary_size` words and writes `token_count` tokens.

    Fine-tuning on new phrasings appends words and program tokens after the
    known ones (ids unchanged). A new word starts as UNKNOWN's embedding (as the
    state players grow theirs), so the parser reads it as it did before. A new
    token starts at the mean of the known token embeddings with a zero output
    row and a bias below every known one, so it is not chosen until training
    teaches it; perception's weights are not touched.
    """
    from players.state.training import with_new_words  # the state players' rule for new words

    grown = dict(state_dict)
    grown["parser.words.weight"] = with_new_words(
        {"words.weight": state_dict["parser.words.weight"]}, vocabulary_size)["words.weight"]
    embedding, weight, bias = (state_dict[k] for k in ("parser.tokens.weight", "parser.out.2.weight", "parser.out.2.bias"))
    extra = token_count - embedding.shape[0]
    if extra > 0:
        grown["parser.tokens.weight"] = torch.cat([embedding, embedding[2:].mean(0, keepdim=True).expand(extra, -1)])
        grown["parser.out.2.weight"] = torch.cat([weight, weight.new_zeros(extra, weight.shape[1])])
        grown["parser.out.2.bias"] = torch.cat([bias, bias.new_full((extra,), float(bias.min()) - NEW_TOKEN_BIAS_MARGIN)])
    return grown


def facts_of(perceived: PerceivedScene) -> SceneFacts:
    """The executor's facts of a perceived scene (relations from the perceived world coordinates)."""
    return SceneFacts.from_arrays(perceived.attributes, perceived.coords, _DIRECTIONS, PERCEIVED_VOCABULARY)


def root_function(program: Program) -> str:
    return program[-1].function if program else ""


def fallback_answers(programs: Sequence[Program], answers: Sequence[str]) -> dict[str, str]:
    """Per last function of a program, its most frequent answer in the training data (ties: sorted first)."""
    counts: dict[str, Counter[str]] = {}
    for program, answer in zip(programs, answers, strict=True):
        counts.setdefault(root_function(program), Counter())[answer.strip().lower()] += 1
    return {root: min(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0] for root, counter in counts.items()}


@torch.no_grad()
def perceive(model: NeuroSymbolicNetwork, images: torch.Tensor, width: int, height: int) -> list[PerceivedScene]:
    maps = model.perception(images)
    return decode_maps(maps, model.config.perception.threshold, width, height)


Edit = tuple[str, int, int, int]
"""("drop" | "add", peak, 0, 0) or ("attribute", peak, attribute index, new value id)."""

_RADII = np.array([PERCEIVED_VOCABULARY.radius(size) for size in PERCEIVED_VOCABULARY.sizes])


def _logit(probability: float) -> float:
    probability = min(max(probability, 1e-6), 1.0 - 1e-6)  # a float32 sigmoid reaches 1.0
    return float(np.log(probability / (1.0 - probability)))


@dataclass
class PerceivedAlternatives:
    """One image's perception and what it was unsure of, for repairs.

    `points` (K, 2), `scores` (K,): the heatmap peaks above the candidate
    threshold, best first, at most 10; `seen` (K,): those above the perception
    threshold (the scene as perceived); `log_probabilities`: per attribute, (K, values).
    """

    points: np.ndarray
    scores: np.ndarray
    seen: np.ndarray
    log_probabilities: list[np.ndarray]
    threshold: float
    width: int
    height: int

    def scene(self, edits: Sequence[Edit] = ()) -> PerceivedScene:
        """The perceived scene with `edits` applied (none: exactly what `decode_maps` gives)."""
        include = self.seen.copy()
        ids = np.stack([p.argmax(axis=1) for p in self.log_probabilities], axis=1).astype(np.int64)
        ids = ids.reshape(len(self.scores), len(self.log_probabilities))
        for kind, peak, attribute, value in edits:
            if kind == "attribute":
                ids[peak, attribute] = value
            else:
                include[peak] = kind == "add"
        kept = np.nonzero(include)[0]
        coords = (ground_points(self.points[kept], _RADII[ids[kept, 0]], self.width, self.height)
                  if len(kept) else np.zeros((0, 3)))
        return PerceivedScene(coords, ids[kept], self.scores[kept], self.points[kept])

    def edits(self) -> list[Edit]:
        """Every single edit, likeliest first: its cost is how far it moves a decision against the network's scores."""
        costed: list[tuple[float, Edit]] = []
        for peak, score in enumerate(self.scores.tolist()):
            if not self.seen[peak]:
                costed.append((_logit(self.threshold) - _logit(score), ("add", peak, 0, 0)))
                continue
            costed.append((_logit(score) - _logit(self.threshold), ("drop", peak, 0, 0)))
            for attribute, log_probabilities in enumerate(self.log_probabilities):
                best, second = np.argsort(-log_probabilities[peak])[:2].tolist()
                cost = float(log_probabilities[peak, best] - log_probabilities[peak, second])
                costed.append((cost, ("attribute", peak, attribute, second)))
        costed.sort(key=lambda pair: pair[0])
        return [edit for _, edit in costed]


@torch.no_grad()
def perceive_alternatives(model: NeuroSymbolicNetwork, images: torch.Tensor, width: int,
                          height: int) -> list[PerceivedAlternatives]:
    """Per image, the perceived scene and its alternatives."""
    return alternatives_from_maps(model.perception(images), model.config.perception.threshold,
                                  model.config.candidate_threshold, width, height)


def alternatives_from_maps(maps: PerceptionMaps, threshold: float, candidate_threshold: float, width: int,
                           height: int) -> list[PerceivedAlternatives]:
    """Decoded like `decode_maps` (local maxima of the heatmap, at most 10), down to the candidate threshold."""
    candidates = min(candidate_threshold, threshold)
    probability = torch.sigmoid(maps.heat)
    peaks = probability == nn.functional.max_pool2d(probability.unsqueeze(1), 3, 1, 1)[:, 0]
    scored = torch.where(peaks & (probability > candidates), probability, torch.zeros_like(probability))
    grid_width = scored.shape[2]
    result = []
    for image in range(scored.shape[0]):
        values, cells = scored[image].flatten().topk(min(MAX_PERCEIVED, scored[image].numel()))
        keep = values > 0
        values, cells = values[keep], cells[keep]
        row, column = cells // grid_width, cells % grid_width
        offsets = maps.offsets[image, :, row, column].T.clamp(0.0, 1.0)
        points = ((torch.stack([column, row], dim=1).float() + offsets) * STRIDE).cpu().numpy().astype(np.float64)
        logits = maps.attributes[image, :, row, column].T
        log_probabilities = [part.log_softmax(dim=1).cpu().numpy().astype(np.float64)
                             for part in logits.split(ATTRIBUTE_SIZES, dim=1)]
        scores = values.cpu().numpy()
        result.append(PerceivedAlternatives(points.reshape(-1, 2), scores, scores > threshold, log_probabilities,
                                            threshold, width, height))
    return result


@torch.no_grad()
def parse(model: NeuroSymbolicNetwork, words: torch.Tensor, arity: torch.Tensor, tokens: Sequence[str]) -> list[Program]:
    rows = model.parser.decode(words, arity).cpu().numpy()
    return [decode_ids(row, tokens) for row in rows]


ANSWERED, REPAIRED, FELL_BACK = "answered", "repaired", "fell back"
"""How an answer came: on the scene as perceived, on a repaired scene, or from the fallback."""


def _answer_on(program: Program, perceived: PerceivedScene) -> str:
    try:
        return execute(program, facts_of(perceived))
    except InputError:  # a parsed program whose types do not fit (an input of the wrong kind)
        return INVALID_ANSWER


def execute_on(program: Program, perceived: PerceivedScene | PerceivedAlternatives, fallback: dict[str, str],
               default: str) -> tuple[str, str]:
    """The program's answer on the perceived scene, and how it came (ANSWERED, REPAIRED or FELL_BACK).

    Given `PerceivedAlternatives`, a program with no answer on the scene is tried on each single edit,
    likeliest first, before the fallback.
    """
    alternatives = perceived if isinstance(perceived, PerceivedAlternatives) else None
    answer = _answer_on(program, alternatives.scene() if alternatives else perceived)
    if answer != INVALID_ANSWER:
        return answer, ANSWERED
    if alternatives is not None:
        for edit in alternatives.edits():
            answer = _answer_on(program, alternatives.scene([edit]))
            if answer != INVALID_ANSWER:
                return answer, REPAIRED
    return fallback.get(root_function(program), default), FELL_BACK


class PipelineAnswers(NamedTuple):
    answers: list[str]
    programs: list[Program]
    perceived: list[PerceivedScene]
    fell_back: int
    repaired: int


def answer_questions(
    model: NeuroSymbolicNetwork,
    images: torch.Tensor,
    words: torch.Tensor,
    image_of: np.ndarray,
    *,
    arity: torch.Tensor,
    tokens: Sequence[str],
    fallback: dict[str, str],
    width: int,
    height: int,
    default: str = "no",
) -> PipelineAnswers:
    """Answers of questions `words` (Q, L) on images (S, H, W, 3), question q asking about image_of[q].

    Returns the answers, the parsed programs, the perceived scenes and how many
    answers came from a repaired scene and from the fallback.
    """
    alternatives = perceive_alternatives(model, images, width, height)
    perceived = [a.scene() for a in alternatives]
    programs = parse(model, words, arity, tokens)
    answers, how = [], Counter[str]()
    for program, image in zip(programs, image_of.tolist(), strict=True):
        answer, came = execute_on(program, alternatives[image] if model.config.repair else perceived[image],
                                  fallback, default)
        answers.append(answer)
        how[came] += 1
    return PipelineAnswers(answers, programs, perceived, how[FELL_BACK], how[REPAIRED])
