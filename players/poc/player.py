"""The CLEVR-POC players: answer a hidden-object question with the set of possible values.

- `poc-state-neuro-symbolic`: reads the scene JSON; parses the question into a
  program; the program's referents are resolved on the visible scene into an
  ASP query rule, and clingo answers it with the query's environment (brave
  reasoning, as the oracle).
- `poc-neuro-symbolic`: the same, with the visible scene perceived from the
  rendered image (`Query.image_path`) instead of read.
- `poc-neural`, `poc-neural-nl`, `poc-neural-asp`: the CLIP-style baseline
  (players.poc.neural) without knowledge, with the environment's English
  sentences, with its ASP constraints.

Every query must carry its environment (`Query.environment`, filled by the
game for CLEVR-POC items); one without gets an error answer. When the
neuro-symbolic pipeline yields no answer (the program is no hidden-object
program, a description does not pick out one visible object, or no completion
of the scene meets the environment) the player answers the whole domain of the
asked attribute, "anything is possible", since a player always answers; what
failed is recorded in `last_traces` (one dict per query of the last batch:
`program`, `scene` (perceived, pixel player only), `failure`), which
`poc eval` reads to tell parsing errors from perception errors.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from clevr_game.errors import InputError
from clevr_game.programs import Program
from clevr_game.scene import Scene
from clevr_game.vocab import CLEVR_POC
from players.pixel.images import ImageSpec, load_image
from players.pixel.perception import PerceptionConfig
from players.poc.data import HiddenObjectSolver
from players.poc.files import load_poc_player, shipped_file
from players.poc.language import asked_attribute
from players.poc.neural import NeuralConfig, NeuralEncoder, PocNeuralNetwork, predicted_sets
from players.poc.parser import PocParser
from players.poc.perception import PocPerceptionNetwork, perceive_scenes
from players.protocol import NEED_IMAGE, NEED_SCENE, Answer, Player, Query, checked_answer

TRAIN_HINTS = {
    "poc-state-neuro-symbolic": "clevr-game poc train --player poc-state-neuro-symbolic --items DIR --out FILE",
    "poc-neuro-symbolic": "clevr-game poc train --player poc-neuro-symbolic --items DIR --out FILE",
    "poc-neural": "clevr-game poc train --player poc-neural --knowledge none --items DIR --out FILE",
}


def _not_poc(query: Query, who: str) -> Answer | None:
    if query.environment is None:
        return Answer.failed(query.item_id, f"{who}: query {query.item_id!r}: not a CLEVR-POC query (no environment given)")
    return None


def whole_domain(program: Program | None, question: str) -> list[str] | None:
    """Every value of the asked attribute: the parsed program's, else the question's first words'."""
    attribute = None
    if program and program[-1].function.startswith("query_"):
        attribute = program[-1].function[len("query_"):]
    attribute = attribute if attribute in ("size", "color", "material", "shape") else asked_attribute(question)
    return list(CLEVR_POC.values(attribute)) if attribute else None


class PocStateNeuroSymbolicPlayer(Player):
    """Question parser + clingo on the given visible scene."""

    needs = frozenset({NEED_SCENE})
    kind = "poc-state-neuro-symbolic"

    def __init__(self, path: str | os.PathLike[str] | None = None, *, name: str | None = None,
                 fallback: bool = True, batch_size: int = 256) -> None:
        self.name = name or self.kind
        self.path = str(path or shipped_file(self.kind))
        self.data = load_poc_player(self.path, self.kind, TRAIN_HINTS[self.kind])
        self.parser = PocParser.from_state(self.data["parser"], self.path)
        self.solver = HiddenObjectSolver()
        self.fallback = fallback
        self.batch_size = batch_size
        self.last_traces: list[dict[str, Any]] = []

    def visible_scenes(self, queries: Sequence[Query]) -> list[Scene | None]:
        return [q.scene for q in queries]

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers: list[Answer | None] = [_not_poc(q, self.name) for q in queries]
        traces: list[dict[str, Any]] = [{"program": None, "scene": None, "failure": "input"} for _ in queries]
        todo = [k for k, a in enumerate(answers) if a is None]
        if todo:
            chosen = [queries[k] for k in todo]
            programs = self.parser.parse([q.question for q in chosen], self.batch_size)
            scenes = self.visible_scenes(chosen)
            for k, query, program, scene in zip(todo, chosen, programs, scenes, strict=True):
                answers[k], traces[k] = self._answer_one(query, program, scene)
        self.last_traces = traces
        return answers  # type: ignore[return-value]

    def _answer_one(self, query: Query, program: Program | None, scene: Scene | None) -> tuple[Answer, dict]:
        trace: dict[str, Any] = {"program": program, "scene": scene if NEED_IMAGE in self.needs else None,
                                 "failure": None}
        where = f"{self.name}: query {query.item_id!r}"
        if scene is None:
            trace["failure"] = "input"
            return Answer.failed(query.item_id, f"{where}: no {'image' if NEED_IMAGE in self.needs else 'scene'}"), trace
        if program is None:
            trace["failure"], message = "parse", "the parser's program did not close within its length"
        else:
            solved = self.solver.solve(program, scene, query.environment)
            if solved.values is not None:
                return checked_answer(query, list(solved.values), self.name), trace
            trace["failure"], message = solved.failure, solved.message
        domain = whole_domain(program, query.question)
        if not self.fallback or domain is None:
            return Answer.failed(query.item_id, f"{where}: {trace['failure']}: {message}"), trace
        return checked_answer(query, domain, self.name), trace


class PocNeuroSymbolicPlayer(PocStateNeuroSymbolicPlayer):
    """Perception of the rendered visible scene + question parser + clingo."""

    needs = frozenset({NEED_IMAGE})
    kind = "poc-neuro-symbolic"

    def __init__(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        part = self.data["perception"]
        try:
            self.perception = PocPerceptionNetwork(PerceptionConfig(**part["config"]))
            self.perception.load_state_dict(part["state_dict"])
        except (KeyError, TypeError, RuntimeError) as exc:
            raise InputError(f"{self.path}: perception unreadable: {str(exc).splitlines()[0]}") from None
        self.perception.eval()
        self.spec = ImageSpec.from_dict(self.data["image"], self.path)

    @property
    def image_spec(self) -> ImageSpec:
        return self.spec

    def visible_scenes(self, queries: Sequence[Query]) -> list[Scene | None]:
        scenes: list[Scene | None] = [None] * len(queries)
        readable, images = [], []
        for k, query in enumerate(queries):
            if query.image_path is None:
                continue
            try:
                images.append(load_image(query.image_path, self.spec))
                readable.append(k)
            except InputError:
                continue
        for start in range(0, len(readable), self.batch_size):
            chunk = readable[start:start + self.batch_size]
            perceived = perceive_scenes(self.perception, np.stack(images[start:start + self.batch_size]), self.spec)
            for k, scene in zip(chunk, perceived, strict=True):
                scenes[k] = scene
        return scenes


class PocNeuralPlayer(Player):
    """The CLIP-style baseline on the scene state, question and (per variant) the constraints."""

    needs = frozenset({NEED_SCENE})
    kind = "poc-neural"

    def __init__(self, path: str | os.PathLike[str] | None = None, *, knowledge: str = "none",
                 name: str | None = None, batch_size: int = 256) -> None:
        variant = "" if knowledge == "none" else knowledge
        self.path = str(path or shipped_file(self.kind, variant))
        self.data = load_poc_player(self.path, self.kind, TRAIN_HINTS[self.kind])
        part = self.data["neural"]
        try:
            self.config = NeuralConfig(**part["config"])
            self.encoder = NeuralEncoder(self.config.knowledge)
            self.network = PocNeuralNetwork(self.config, len(self.encoder.question_words),
                                            max(len(self.encoder.knowledge_words), 2))
            self.network.load_state_dict(part["state_dict"])
            self.threshold = float(part["threshold"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise InputError(f"{self.path}: neural baseline unreadable: {str(exc).splitlines()[0]}") from None
        self.network.eval()
        self.name = name or (self.kind if variant == "" else f"{self.kind}-{variant}")
        self.batch_size = batch_size

    @torch.no_grad()
    def probabilities(self, scenes: Sequence[Scene], questions: Sequence[str], environments: Sequence[str]) -> np.ndarray:
        out = []
        for start in range(0, len(scenes), self.batch_size):
            stop = start + self.batch_size
            batch = self.encoder.batch(scenes[start:stop], questions[start:stop], environments[start:stop])
            out.append(torch.sigmoid(self.network(*batch.inputs())).numpy())
        return np.concatenate(out) if out else np.zeros((0, 17))

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers: list[Answer | None] = [_not_poc(q, self.name) for q in queries]
        for k, query in enumerate(queries):
            if answers[k] is None and query.scene is None:
                answers[k] = Answer.failed(query.item_id, f"{self.name}: query {query.item_id!r}: no scene")
            elif answers[k] is None and asked_attribute(query.question) is None:
                answers[k] = Answer.failed(query.item_id, f"{self.name}: query {query.item_id!r}: "
                                           "not a hidden-object question ('What <attribute> is the missing ...')")
        todo = [k for k, a in enumerate(answers) if a is None]
        if todo:
            chosen = [queries[k] for k in todo]
            probabilities = self.probabilities([q.scene for q in chosen], [q.question for q in chosen],
                                               [q.environment for q in chosen])
            sets = predicted_sets(probabilities, [asked_attribute(q.question) for q in chosen], self.threshold)
            for k, query, values in zip(todo, chosen, sets, strict=True):
                answers[k] = checked_answer(query, values, self.name)
        return answers  # type: ignore[return-value]
