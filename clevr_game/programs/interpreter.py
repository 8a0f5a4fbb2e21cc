"""The step interpreter: one small closure per node, run over SceneFacts bit sets.

It is cheap to build (no source generated or compiled), so it serves every
program's first runs and every trace; a program that keeps being run is handed
to the generated code of `codegen` (see executor.CompiledProgram).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from clevr_game.programs.facts import RELATION_COUNT, SceneFacts
from clevr_game.programs.program import Node, Program
from clevr_game.programs.reference import INVALID_ANSWER
from clevr_game.vocab import ATTRIBUTES, RELATIONS


class Invalid:
    """The output of a failed node in a trace (distinct from every real output)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INVALID"

    def __reduce__(self) -> str:
        # Pickled by name, so a trace sent to a worker process keeps the singleton.
        return "INVALID"


INVALID = Invalid()

Outputs = list[Any]
Step = Callable[[SceneFacts, Outputs], Any]


def single(objects: int) -> int | Invalid:
    """The index of the only object of `objects`, or INVALID when it has not exactly one."""
    if not objects or objects & (objects - 1):
        return INVALID
    return objects.bit_length() - 1


def _template_filters(side_inputs: Sequence[str]) -> list[tuple[int, str]]:
    # Template side inputs are size, color, material, shape; "" means any.
    return [(a, value) for a, value in enumerate(side_inputs[: len(ATTRIBUTES)]) if value]


def _narrowed(objects: int, masks: tuple[dict[str, int], ...], filters: list[tuple[int, str]]) -> int:
    for a, value in filters:
        objects &= masks[a].get(value, 0)
    return objects


# One builder per function: node -> step. Primitives get a single closure each,
# the template composites a narrowing then a reduction.

def _scene(node: Node) -> Step:
    return lambda facts, out: facts.everything


def _filter_attribute(a: int) -> Callable[[Node], Step]:
    def build(node: Node) -> Step:
        # A plain filter reads its value as is: "" matches no object here.
        first, value = node.inputs[0], node.value_inputs[0]
        return lambda facts, out: out[first] & facts.masks[a].get(value, 0)

    return build


def _unique(node: Node) -> Step:
    first = node.inputs[0]
    return lambda facts, out: single(out[first])


def _count(node: Node) -> Step:
    first = node.inputs[0]
    return lambda facts, out: out[first].bit_count()


def _exist(node: Node) -> Step:
    first = node.inputs[0]
    return lambda facts, out: out[first] != 0


def _relate(node: Node) -> Step:
    first, r = node.inputs[0], RELATIONS.index(node.value_inputs[0])
    return lambda facts, out: facts.related[RELATION_COUNT * out[first] + r]


def _query(a: int) -> Callable[[Node], Step]:
    def build(node: Node) -> Step:
        first = node.inputs[0]
        return lambda facts, out: facts.values[a][out[first]]

    return build


def _same(a: int) -> Callable[[Node], Step]:
    def build(node: Node) -> Step:
        first = node.inputs[0]

        def step(facts: SceneFacts, out: Outputs) -> int:
            obj = out[first]
            # The object's own bit is set in its value's mask: xor takes it out.
            return facts.masks[a][facts.values[a][obj]] ^ (1 << obj)

        return step

    return build


def _pair(operation: Callable[[Any, Any], Any]) -> Callable[[Node], Step]:
    def build(node: Node) -> Step:
        first, second = node.inputs
        return lambda facts, out: operation(out[first], out[second])

    return build


def _template_filter(reduction: Callable[[int], Any] | None) -> Callable[[Node], Step]:
    def build(node: Node) -> Step:
        first, filters = node.inputs[0], _template_filters(node.value_inputs)
        if reduction is None:
            return lambda facts, out: _narrowed(out[first], facts.masks, filters)
        return lambda facts, out: reduction(_narrowed(out[first], facts.masks, filters))

    return build


def _relate_filter(reduction: Callable[[int], Any] | None) -> Callable[[Node], Step]:
    def build(node: Node) -> Step:
        first, r = node.inputs[0], RELATIONS.index(node.value_inputs[0])
        filters = _template_filters(node.value_inputs[1:])

        def step(facts: SceneFacts, out: Outputs) -> Any:
            objects = _narrowed(facts.related[RELATION_COUNT * out[first] + r], facts.masks, filters)
            return reduction(objects) if reduction is not None else objects

        return step

    return build


def _exists(objects: int) -> bool:
    return objects != 0


_BUILDERS: dict[str, Callable[[Node], Step]] = {
    "scene": _scene, "unique": _unique, "count": _count, "exist": _exist, "relate": _relate,
    "union": _pair(operator.or_), "intersect": _pair(operator.and_),
    "equal_integer": _pair(operator.eq), "equal_object": _pair(operator.eq),
    "less_than": _pair(operator.lt), "greater_than": _pair(operator.gt),
}
for _a, _attribute in enumerate(ATTRIBUTES):
    _BUILDERS[f"filter_{_attribute}"] = _filter_attribute(_a)
    _BUILDERS[f"query_{_attribute}"] = _query(_a)
    _BUILDERS[f"same_{_attribute}"] = _same(_a)
    _BUILDERS[f"equal_{_attribute}"] = _pair(operator.eq)
for _suffix, _reduction in (("", None), ("_unique", single), ("_count", int.bit_count), ("_exist", _exists)):
    _BUILDERS[f"filter{_suffix}"] = _template_filter(_reduction)
    _BUILDERS[f"relate_filter{_suffix}"] = _relate_filter(_reduction)


def node_step(node: Node) -> Step:
    """The closure computing one node from the outputs before it (inputs known to be valid)."""
    return _BUILDERS[node.function](node)


class Interpreter:
    """A type-checked program as steps; `trace` runs them all, `answer` judges the trace."""

    __slots__ = ("steps", "consumed", "final_is_set")

    def __init__(self, program: Program, types: list[str]) -> None:
        self.steps = [(node.inputs, node_step(node)) for node in program]
        self.consumed = sorted({source for node in program for source in node.inputs})
        self.final_is_set = types[-1] == "ObjectSet"

    def trace(self, facts: SceneFacts) -> Outputs:
        out: Outputs = []
        for inputs, step in self.steps:
            for source in inputs:
                if out[source] is INVALID:
                    out.append(INVALID)
                    break
            else:
                out.append(step(facts, out))
        return out

    def answer(self, facts: SceneFacts) -> str:
        if self.final_is_set:
            return INVALID_ANSWER
        out = self.trace(facts)
        # The reference gives up as soon as a node reads a failed output.
        for source in self.consumed:
            if out[source] is INVALID:
                return INVALID_ANSWER
        final = out[-1]
        if final is INVALID:
            return INVALID_ANSWER
        if final is True or final is False:
            return "yes" if final else "no"
        return str(final)
