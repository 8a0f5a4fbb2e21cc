"""The neuro-symbolic pipeline (after Yi et al. 2018): perceive the scene, parse the question, execute.

`NeuroSymbolicNetwork` holds the two learned parts (perception and parser);
`answer_questions` runs the whole pipeline on a batch: perceived objects
become `SceneFacts` (attributes and relations from the perceived world
coordinates) and the parsed program runs on them with
`clevr_game.programs.execute`, the game's own executor. A program with no
answer on the perceived scene (e.g. `unique` of two objects) gets the most
frequent training answer of its kind of question (the program's last
function), since a VQA player always answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.programs import INVALID_ANSWER, Program, SceneFacts, execute
from clevr_game.scene import DEFAULT_DIRECTIONS
from players.pixel.parser import ParserConfig, ProgramParser
from players.pixel.perception import (
    PERCEIVED_VOCABULARY,
    PerceivedScene,
    PerceptionConfig,
    PerceptionNetwork,
    decode_maps,
)
from players.pixel.program_tokens import decode_ids

_DIRECTIONS = dict(DEFAULT_DIRECTIONS)


@dataclass(frozen=True)
class NeuroSymbolicConfig:
    perception: PerceptionConfig = field(default_factory=PerceptionConfig)
    parser: ParserConfig = field(default_factory=ParserConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NeuroSymbolicConfig:
        unknown = set(data) - {"perception", "parser"}
        if unknown:
            raise TypeError(f"unexpected config keys {sorted(unknown)} (expected 'perception' and 'parser')")
        return cls(PerceptionConfig(**data.get("perception", {})), ParserConfig(**data.get("parser", {})))

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
    from players.training import with_new_words  # the state players' rule for new words

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


@torch.no_grad()
def parse(model: NeuroSymbolicNetwork, words: torch.Tensor, arity: torch.Tensor, tokens: Sequence[str]) -> list[Program]:
    rows = model.parser.decode(words, arity).cpu().numpy()
    return [decode_ids(row, tokens) for row in rows]


def execute_on(program: Program, perceived: PerceivedScene, fallback: dict[str, str], default: str) -> tuple[str, bool]:
    """The program's answer on the perceived scene, and whether it came from the fallback."""
    try:
        answer = execute(program, facts_of(perceived))
    except InputError:  # a parsed program whose types do not fit (an input of the wrong kind)
        answer = INVALID_ANSWER
    if answer == INVALID_ANSWER:
        return fallback.get(root_function(program), default), True
    return answer, False


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
) -> tuple[list[str], list[Program], list[PerceivedScene], int]:
    """Answers of questions `words` (Q, L) on images (S, H, W, 3), question q asking about image_of[q].

    Returns the answers, the parsed programs, the perceived scenes and how many
    answers came from the fallback.
    """
    perceived = perceive(model, images, width, height)
    programs = parse(model, words, arity, tokens)
    answers, fell_back = [], 0
    for program, image in zip(programs, image_of.tolist(), strict=True):
        answer, fallback_used = execute_on(program, perceived[image], fallback, default)
        answers.append(answer)
        fell_back += fallback_used
    return answers, programs, perceived, fell_back
