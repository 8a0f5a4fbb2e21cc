"""Functional programs: nodes, parsing from CLEVR question JSON and template JSON, writing back.

Two input forms are read unchanged:
- CLEVR question JSON: `{"function", "inputs", "value_inputs"}`;
- CLEVR template JSON: `{"type", "inputs", "side_inputs"}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clevr_game.errors import InputError
from clevr_game.vocab import ATTRIBUTES, RELATIONS, Vocabulary

PRIMITIVE_FUNCTIONS: frozenset[str] = frozenset(
    ["scene", "unique", "relate", "union", "intersect", "count", "exist",
     "equal_integer", "less_than", "greater_than", "equal_object"]
    + [f"filter_{a}" for a in ATTRIBUTES]
    + [f"query_{a}" for a in ATTRIBUTES]
    + [f"same_{a}" for a in ATTRIBUTES]
    + [f"equal_{a}" for a in ATTRIBUTES]
)
"""CLEVR's catalogue of primitive functions (metadata.json, non-template entries)."""

TEMPLATE_FUNCTIONS: frozenset[str] = frozenset(
    ["filter", "filter_unique", "filter_count", "filter_exist",
     "relate_filter", "relate_filter_unique", "relate_filter_count", "relate_filter_exist"]
)
"""Composite functions that appear only in templates (side inputs: [relation,] size, color, material, shape)."""

ALL_FUNCTIONS = PRIMITIVE_FUNCTIONS | TEMPLATE_FUNCTIONS

ARITY: dict[str, int] = {f: 1 for f in ALL_FUNCTIONS}
ARITY.update({"scene": 0, "union": 2, "intersect": 2, "equal_integer": 2, "less_than": 2,
              "greater_than": 2, "equal_object": 2})
ARITY.update({f"equal_{a}": 2 for a in ATTRIBUTES})


@dataclass(frozen=True, slots=True)
class Node:
    function: str
    inputs: tuple[int, ...] = ()
    value_inputs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"inputs": list(self.inputs), "function": self.function, "value_inputs": list(self.value_inputs)}


Program = tuple[Node, ...]


def _plain_node(data: Any, index: int) -> Node | None:
    """The Node of a question file's usual node dict in a few cheap tests; None for anything else."""
    if type(data) is not dict:
        return None
    function = data.get("function")
    inputs = data.get("inputs", [])
    values = data.get("value_inputs", [])
    if type(function) is not str or type(inputs) is not list or type(values) is not list:
        return None
    if ARITY.get(function) != len(inputs) or "type" in data or "side_inputs" in data:
        return None
    for source in inputs:
        if type(source) is not int or not 0 <= source < index:
            return None
    for value in values:
        if type(value) is not str:
            return None
    return Node(function, tuple(inputs), tuple(values))


def parse_node(data: Any, index: int, where: str) -> Node:
    node = _plain_node(data, index)
    if node is not None:
        return node
    at = f"{where}program node {index}" if where else f"program node {index}"
    if not isinstance(data, dict):
        raise InputError(f"{at}: expected a dict, got {type(data).__name__}")
    function = data.get("function", data.get("type"))
    if not isinstance(function, str):
        raise InputError(f"{at}: missing field 'function' (or template 'type')")
    if function not in ALL_FUNCTIONS:
        raise InputError(f"{at}: unknown function {function!r}")
    inputs = data.get("inputs", [])
    if not isinstance(inputs, list) or any(
        isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < index for i in inputs
    ):
        raise InputError(f"{at}: inputs must be indices of earlier nodes, got {inputs!r}")
    if len(inputs) != ARITY[function]:
        raise InputError(f"{at}: {function} takes {ARITY[function]} inputs, got {len(inputs)}")
    values = data.get("value_inputs", data.get("side_inputs", []))
    if not isinstance(values, list) or any(not isinstance(v, str) for v in values):
        raise InputError(f"{at}: value_inputs must be a list of strings, got {values!r}")
    return Node(function, tuple(inputs), tuple(values))


def parse_program(data: Any, where: str = "") -> Program:
    """A CLEVR program (list of node dicts) -> Program; InputError names the node and field.

    `where` prefixes messages, e.g. `questions.json: question 4, `.
    """
    if not isinstance(data, list) or not data:
        raise InputError(f"{where}program must be a non-empty list of nodes")
    return tuple(parse_node(node, i, where) for i, node in enumerate(data))


def program_to_json(program: Program) -> list[dict[str, Any]]:
    """The CLEVR question JSON form (`function` / `inputs` / `value_inputs`)."""
    return [node.to_json() for node in program]


def _value_kinds(function: str) -> tuple[tuple[str, ...], int]:
    """What each value input of `function` names (`relation` or an attribute), and how many are required."""
    if function == "relate":
        return ("relation",), 1
    if function.startswith("filter_") and function[7:] in ATTRIBUTES:
        return (function[7:],), 1
    if function in TEMPLATE_FUNCTIONS:  # composite side inputs: [relation,] size, color, material, shape
        relates = function.startswith("relate")
        return ("relation",) * relates + ATTRIBUTES, int(relates)
    return (), 0


_VALUE_KINDS: dict[str, tuple[tuple[str, ...], int]] = {function: _value_kinds(function) for function in ALL_FUNCTIONS}


def validate_values(program: Program, vocabulary: Vocabulary, where: str = "") -> None:
    """Every value input names a relation or a value of `vocabulary`; InputError names the node.

    The executor reads an unknown value as one no object has and answers INVALID, which
    would score a typo in a question file as the player's mistake. Template composites
    may leave an attribute "" (any value).
    """
    allowed_by_kind: dict[str, tuple[str, ...]] = {"relation": RELATIONS}
    for i, node in enumerate(program):
        kinds, required = _VALUE_KINDS.get(node.function) or _value_kinds(node.function)
        if not required <= len(node.value_inputs) <= len(kinds):
            expected = f"{required}" if required == len(kinds) else f"{required} to {len(kinds)}"
            raise InputError(
                f"{where}program node {i}: {node.function} takes {expected} value inputs, "
                f"got {list(node.value_inputs)!r}"
            )
        for kind, value in zip(kinds, node.value_inputs, strict=False):  # count checked above
            allowed = allowed_by_kind.get(kind)
            if allowed is None:
                allowed = allowed_by_kind[kind] = vocabulary.values(kind)
            if value in allowed or (value == "" and kind != "relation" and node.function in TEMPLATE_FUNCTIONS):
                continue
            raise InputError(
                f"{where}program node {i}: {node.function}: unknown {kind} {value!r} "
                f"(expected one of {', '.join(allowed)})"
            )
