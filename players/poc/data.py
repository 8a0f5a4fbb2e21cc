"""CLEVR-POC training and evaluation examples, and the symbolic half of the neuro-symbolic players.

An example is one item of a `poc generate` folder: the question, the visible
scene, the item's program (which names the hidden object through visible
referents), its ASP rule, the stored answer set and the environment's text.

`HiddenObjectSolver` is what both neuro-symbolic players run after their
networks: the parsed program becomes a query rule on the (given or perceived)
visible scene and clingo answers it with the environment, as the oracle does.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass

from clevr_game.asp.environment import Environment
from clevr_game.asp.items import poc_items
from clevr_game.asp.questions import program_rule
from clevr_game.asp.solve import brave_answers
from clevr_game.errors import InputError
from clevr_game.programs import Program
from clevr_game.scene import Scene


@dataclass(frozen=True)
class PocExample:
    item_id: str
    question: str
    scene: Scene
    program: Program
    rule: str
    answer: tuple[str, ...]
    environment: str  # the .lp text
    query_attribute: str


def load_examples(folder: str | os.PathLike[str], limit: int | None = None) -> list[PocExample]:
    """The items of a `poc generate` folder as examples (the first `limit`)."""
    examples = []
    for item in poc_items(folder)[:limit]:
        examples.append(PocExample(
            item.item_id, item.question, item.scene, item.program, item.extra["asp"],
            tuple(item.answer.split(",")), item.extra["environment_text"], str(item.extra["query_attribute"]),
        ))
    if not examples:
        raise InputError(f"{folder}: no CLEVR-POC items")
    return examples


@dataclass(frozen=True)
class Solved:
    """The answer set of a parsed program on a scene, or why there is none.

    failure: "rule" (the program is not a hidden-object program, or a referent's
    description does not pick out exactly one visible object), "solve" (no
    completion of the visible scene meets the environment) or "empty" (the rule
    admits no hidden object, e.g. a wrong parse asking for a value the
    environment rules out: an empty set is no answer).
    """

    values: tuple[str, ...] | None
    failure: str | None = None
    message: str = ""


class HiddenObjectSolver:
    """Program + visible scene + environment text -> answer set, environments grounded once."""

    def __init__(self, max_environments: int = 512) -> None:
        self._environments: OrderedDict[str, Environment] = OrderedDict()
        self.max_environments = max_environments

    def environment(self, text: str) -> Environment:
        environment = self._environments.get(text)
        if environment is None:
            environment = self._environments[text] = Environment.from_text(text, "the query's environment")
            if len(self._environments) > self.max_environments:
                self._environments.popitem(last=False)
        return environment

    def solve(self, program: Program, scene: Scene, environment_text: str) -> Solved:
        try:
            rule = program_rule(program, scene)
        except InputError as exc:
            return Solved(None, "rule", str(exc))
        try:
            values = brave_answers(self.environment(environment_text), scene, rule, scene_name="the visible scene",
                                   question_name="the parsed rule")
        except InputError as exc:
            return Solved(None, "solve", str(exc))
        if not values:
            return Solved(None, "empty", "no hidden object fits the parsed rule")
        return Solved(tuple(values))
