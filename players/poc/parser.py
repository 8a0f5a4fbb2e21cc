"""The question parser of the CLEVR-POC neuro-symbolic players, trained as in the CLEVR-POC paper.

The model is the pixel neuro-symbolic player's GRU encoder-decoder with
attention (`players.pixel.parser.ProgramParser`) over the fixed question words
and program tokens of `players.poc.language`. Decoding is constrained to whole
program trees.

Training follows the paper's NS-VQA baseline (its Table 3):
1. supervised: teacher forcing on a small sample of (question, program) pairs;
2. REINFORCE on the rest with answers only: a program is sampled per question,
   run through clingo with the environment on the visible scene
   (`HiddenObjectSolver`), and rewarded 1 when its answer set equals the stored
   one, else 0; a moving-average baseline lowers the variance.
Program accuracy (the greedy parse equals the item's program, token for token)
is measured after each stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.programs import Program
from players.pixel.parser import START_ID, ParserConfig, ProgramParser
from players.pixel.program_tokens import arities, decode_ids, encode_programs, program_to_tokens
from players.poc.data import HiddenObjectSolver, PocExample
from players.poc.language import program_tokens, question_words

QUESTION_LENGTH = 40
DEFAULT_PARSER = ParserConfig(word_width=48, token_width=48, hidden=96, max_tokens=24)


class PocParser:
    """ProgramParser with the CLEVR-POC vocabularies; parses questions into programs."""

    def __init__(self, config: ParserConfig = DEFAULT_PARSER, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.config = config
        self.words = question_words()
        self.tokens = program_tokens()
        self.model = ProgramParser(config, len(self.words), len(self.tokens))
        self.arity = torch.from_numpy(arities(self.tokens))

    def config_dict(self) -> dict:
        return asdict(self.config)

    def encode_questions(self, questions: Sequence[str]) -> torch.Tensor:
        return torch.from_numpy(np.stack([self.words.encode(q, QUESTION_LENGTH) for q in questions]))

    def encode_programs(self, programs: Sequence[Program]) -> torch.Tensor:
        return torch.from_numpy(encode_programs(programs, self.tokens, self.config.max_tokens))

    def programs_of(self, rows: np.ndarray) -> list[Program | None]:
        out: list[Program | None] = []
        for row in rows:
            try:
                out.append(decode_ids(row.tolist(), self.tokens))
            except InputError:  # a tree cut by the length limit
                out.append(None)
        return out

    @torch.no_grad()
    def parse(self, questions: Sequence[str], batch_size: int = 256) -> list[Program | None]:
        """Greedy parses; None where the decoder ran out of room before the tree closed."""
        self.model.eval()
        out: list[Program | None] = []
        for start in range(0, len(questions), batch_size):
            words = self.encode_questions(questions[start:start + batch_size])
            out.extend(self.programs_of(self.model.decode(words, self.arity).numpy()))
        return out

    def sample(self, words: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Sampled ids (B, T) (0 after each tree closes) and their summed log-probabilities (B,).

        The same constraint as greedy decoding: only tokens whose tree can still
        close within the length limit may be drawn.
        """
        model, limit = self.model, self.config.max_tokens
        outputs, mask, state = model.encode(words)
        batch = words.shape[0]
        result = torch.zeros(batch, limit, dtype=torch.long)
        log_prob = torch.zeros(batch)
        previous = torch.full((batch, 1), START_ID, dtype=torch.long)
        open_inputs = torch.ones(batch, dtype=torch.long)
        usable = self.arity >= 0
        for step in range(limit):
            active = open_inputs > 0
            if not bool(active.any()):
                break
            states, state = model.decoder(model.tokens(previous), state)
            logits = model._scores(states, outputs, mask)[:, 0]
            room = limit - step - 1
            allowed = usable.unsqueeze(0) & (open_inputs.unsqueeze(1) + self.arity.unsqueeze(0) - 1 <= room)
            logits = logits.masked_fill(~allowed, float("-inf"))
            probabilities = logits.softmax(dim=-1)
            choice = torch.multinomial(probabilities.detach(), 1, generator=generator)[:, 0]
            chosen = torch.log_softmax(logits, dim=-1).gather(1, choice.unsqueeze(1))[:, 0]
            choice = torch.where(active, choice, torch.zeros_like(choice))
            log_prob = log_prob + torch.where(active, chosen, torch.zeros_like(chosen))
            result[:, step] = choice
            open_inputs = torch.where(active, open_inputs + self.arity[choice] - 1, open_inputs)
            previous = choice.unsqueeze(1)
        return result, log_prob

    def state(self) -> dict:
        return {"config": self.config_dict(), "state_dict": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
                "words": list(self.words.words), "tokens": list(self.tokens)}

    @classmethod
    def from_state(cls, data: dict, source: str) -> PocParser:
        try:
            parser = cls(ParserConfig(**data["config"]))
        except (KeyError, TypeError) as exc:
            raise InputError(f"{source}: parser config unreadable: {exc}") from None
        if list(data.get("words", [])) != parser.words.words or list(data.get("tokens", [])) != parser.tokens:
            raise InputError(f"{source}: the parser's words or program tokens differ from this version's")
        try:
            parser.model.load_state_dict(data["state_dict"])
        except (KeyError, RuntimeError) as exc:
            raise InputError(f"{source}: parser weights do not fit: {str(exc).splitlines()[0]}") from None
        return parser


def program_accuracy(parser: PocParser, examples: Sequence[PocExample]) -> float:
    """Share of questions whose greedy parse is the item's program, token for token."""
    parsed = parser.parse([e.question for e in examples])
    right = sum(p is not None and program_to_tokens(p) == program_to_tokens(e.program)
                for p, e in zip(parsed, examples, strict=True))
    return right / len(examples) if examples else 0.0


def answer_accuracy(parser: PocParser, examples: Sequence[PocExample], solver: HiddenObjectSolver) -> float:
    """Exact accuracy of parse + clingo on the true visible scenes."""
    parsed = parser.parse([e.question for e in examples])
    right = sum(p is not None and solver.solve(p, e.scene, e.environment).values == e.answer
                for p, e in zip(parsed, examples, strict=True))
    return right / len(examples) if examples else 0.0


@dataclass
class StageLog:
    stage: str
    steps: int
    seconds: float
    program_accuracy: float
    answer_accuracy: float | None = None
    mean_reward: float | None = None


Deadline = Callable[[], bool]


def train_supervised(
    parser: PocParser, pairs: Sequence[PocExample], *, steps: int, batch_size: int = 32, learning_rate: float = 3e-3,
    seed: int = 0, out_of_time: Deadline = lambda: False,
) -> int:
    """Teacher forcing on (question, program) pairs; returns the steps taken."""
    if not pairs:
        return 0
    words = parser.encode_questions([e.question for e in pairs])
    targets = parser.encode_programs([e.program for e in pairs])
    optimiser = torch.optim.Adam(parser.model.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    parser.model.train()
    for step in range(steps):
        if out_of_time():
            return step
        batch = torch.from_numpy(rng.choice(len(pairs), min(batch_size, len(pairs)), replace=False))
        logits = parser.model(words[batch], targets[batch])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets[batch].flatten(), ignore_index=0)
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(parser.model.parameters(), 1.0)
        optimiser.step()
    return steps


def train_reinforce(
    parser: PocParser, examples: Sequence[PocExample], solver: HiddenObjectSolver, *, steps: int,
    batch_size: int = 32, learning_rate: float = 1e-4, baseline_decay: float = 0.9, entropy: float = 0.0,
    seed: int = 0, out_of_time: Deadline = lambda: False,
) -> tuple[int, float]:
    """REINFORCE with reward 1 for a right answer set; returns the steps taken and the mean reward."""
    if not examples:
        return 0, 0.0
    words = parser.encode_questions([e.question for e in examples])
    optimiser = torch.optim.Adam(parser.model.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    baseline, rewards_seen = None, []
    parser.model.train()
    for step in range(steps):
        if out_of_time():
            return step, float(np.mean(rewards_seen)) if rewards_seen else 0.0
        batch = rng.choice(len(examples), min(batch_size, len(examples)), replace=False)
        ids, log_prob = parser.sample(words[torch.from_numpy(batch)], generator)
        programs = parser.programs_of(ids.numpy())
        rewards = torch.tensor([
            float(p is not None and solver.solve(p, examples[k].scene, examples[k].environment).values
                  == examples[k].answer)
            for p, k in zip(programs, batch.tolist(), strict=True)
        ])
        rewards_seen.extend(rewards.tolist())
        mean = float(rewards.mean())
        baseline = mean if baseline is None else baseline_decay * baseline + (1 - baseline_decay) * mean
        loss = -((rewards - baseline) * log_prob).mean() + entropy * log_prob.mean()
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(parser.model.parameters(), 1.0)
        optimiser.step()
    return steps, float(np.mean(rewards_seen)) if rewards_seen else 0.0


def deadline(max_minutes: float | None) -> Deadline:
    if max_minutes is None:
        return lambda: False
    end = time.monotonic() + 60 * max_minutes
    return lambda: time.monotonic() > end
