"""Functional programs: nodes, parsing from CLEVR question JSON and template JSON, writing back.

Two input forms are read unchanged:
- CLEVR question JSON: `{"function", "inputs", "value_inputs"}`;
- CLEVR template JSON: `{"type", "inputs", "side_inputs"}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clevr_game.errors import InputError
from clevr_game.vocab import ATTRIBUTES, RELATIONS

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


def parse_node(data: Any, index: int, where: str) -> Node:
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


def validate_values(program: Program, vocabulary_values: dict[str, tuple[str, ...]], where: str = "") -> None:
    """Check that value inputs of primitive nodes name known values (relations or attribute values)."""
    for i, node in enumerate(program):
        at = f"{where}program node {i}"
        if node.function.startswith("filter_") and node.function[7:] in ATTRIBUTES:
            attribute = node.function[7:]
            for v in node.value_inputs:
                if v not in vocabulary_values[attribute]:
                    raise InputError(
                        f"{at}: unknown {attribute} {v!r} (expected one of {', '.join(vocabulary_values[attribute])})"
                    )
        elif node.function == "relate":
            for v in node.value_inputs:
                if v not in RELATIONS:
                    raise InputError(f"{at}: unknown relation {v!r} (expected one of {', '.join(RELATIONS)})")
