"""Input and output types of CLEVR's functions (metadata.json), and the program type check.

The fast executor compiles a program once, so it checks it once: every input
refers to an earlier node of the right type and every side input the executor
needs is there. A program that passes cannot raise when executed.
"""

from __future__ import annotations

from clevr_game.errors import InputError
from clevr_game.programs.program import Node, Program
from clevr_game.vocab import ATTRIBUTES, RELATIONS

OBJECT_SET = "ObjectSet"
OBJECT = "Object"
INTEGER = "Integer"
BOOL = "Bool"
ATTRIBUTE_TYPES: dict[str, str] = {a: a.capitalize() for a in ATTRIBUTES}
"""size -> Size, ...: the type of a queried value, as metadata.json names it."""

Signature = tuple[tuple[str, ...], str]


def _catalogue() -> dict[str, Signature]:
    table: dict[str, Signature] = {
        "scene": ((), OBJECT_SET),
        "unique": ((OBJECT_SET,), OBJECT),
        "relate": ((OBJECT,), OBJECT_SET),
        "union": ((OBJECT_SET, OBJECT_SET), OBJECT_SET),
        "intersect": ((OBJECT_SET, OBJECT_SET), OBJECT_SET),
        "count": ((OBJECT_SET,), INTEGER),
        "exist": ((OBJECT_SET,), BOOL),
        "equal_integer": ((INTEGER, INTEGER), BOOL),
        "less_than": ((INTEGER, INTEGER), BOOL),
        "greater_than": ((INTEGER, INTEGER), BOOL),
        "equal_object": ((OBJECT, OBJECT), BOOL),
        "filter": ((OBJECT_SET,), OBJECT_SET),
        "filter_unique": ((OBJECT_SET,), OBJECT),
        "filter_count": ((OBJECT_SET,), INTEGER),
        "filter_exist": ((OBJECT_SET,), BOOL),
        "relate_filter": ((OBJECT,), OBJECT_SET),
        "relate_filter_unique": ((OBJECT,), OBJECT),
        "relate_filter_count": ((OBJECT,), INTEGER),
        "relate_filter_exist": ((OBJECT,), BOOL),
    }
    for attribute, kind in ATTRIBUTE_TYPES.items():
        table[f"filter_{attribute}"] = ((OBJECT_SET,), OBJECT_SET)
        table[f"query_{attribute}"] = ((OBJECT,), kind)
        table[f"same_{attribute}"] = ((OBJECT,), OBJECT_SET)
        table[f"equal_{attribute}"] = ((kind, kind), BOOL)
    return table


SIGNATURES: dict[str, Signature] = _catalogue()

UNIQUE_FUNCTIONS: frozenset[str] = frozenset({"unique", "filter_unique", "relate_filter_unique"})
"""The only functions that can fail (on a set that is not of size one)."""


def _required_values(function: str) -> int:
    """How many side inputs the executor reads unconditionally."""
    if function == "relate" or function.startswith("relate_filter"):
        return 1
    if function.startswith("filter_") and function[7:] in ATTRIBUTES:
        return 1
    return 0


# Per function: input types, output type, side inputs required, whether the first is a relation.
_SPECS: dict[str, tuple[tuple[str, ...], str, int, bool]] = {
    name: (inputs, output, _required_values(name), name.startswith("relate"))
    for name, (inputs, output) in SIGNATURES.items()
}


def check_program(program: Program) -> list[str]:
    """Output type of every node; InputError naming the node when the program is ill-formed."""
    if not isinstance(program, tuple) or not program:
        raise InputError("program must be a non-empty tuple of nodes")
    types: list[str] = []
    for index, node in enumerate(program):
        # The common case in a few cheap tests, inline (this runs once per new program);
        # anything unusual gets the full check, which names what is wrong.
        spec = _SPECS.get(node.function) if type(node) is Node and type(node.function) is str else None
        if spec is not None:
            expected, output, needed, relates = spec
            inputs, values = node.inputs, node.value_inputs
            if type(inputs) is tuple and type(values) is tuple and len(inputs) == len(expected) \
                    and len(values) >= needed and not (relates and values[0] not in RELATIONS):
                for position, source in enumerate(inputs):
                    if type(source) is not int or not 0 <= source < index or types[source] != expected[position]:
                        break
                else:
                    for value in values:
                        if type(value) is not str:
                            break
                    else:
                        types.append(output)
                        continue
        types.append(_check_node(node, index, types))
    return types


def _check_node(node: Node, index: int, types: list[str]) -> str:
    """The output type of one node, or InputError saying what is wrong with it."""
    at = f"program node {index}"
    if not isinstance(node, Node):
        raise InputError(f"{at}: expected a Node, got {type(node).__name__}")
    if not isinstance(node.inputs, tuple) or not isinstance(node.value_inputs, tuple):
        raise InputError(f"{at}: inputs and value_inputs must be tuples")
    if any(not isinstance(v, str) for v in node.value_inputs):
        raise InputError(f"{at}: value_inputs must be strings, got {node.value_inputs!r}")
    signature = SIGNATURES.get(node.function) if isinstance(node.function, str) else None
    if signature is None:
        raise InputError(f"{at}: unknown function {node.function!r}")
    expected, output = signature
    if len(node.inputs) != len(expected):
        raise InputError(f"{at}: {node.function} takes {len(expected)} inputs, got {len(node.inputs)}")
    for position, (source, kind) in enumerate(zip(node.inputs, expected, strict=True)):
        if isinstance(source, bool) or not isinstance(source, int) or not 0 <= source < index:
            raise InputError(f"{at}: input {position} must be the index of an earlier node, got {source!r}")
        if types[source] != kind:
            raise InputError(
                f"{at}: {node.function} input {position} must be {kind}, node {source} gives {types[source]}"
            )
    needed = _required_values(node.function)
    if len(node.value_inputs) < needed:
        raise InputError(f"{at}: {node.function} needs a side input, got none")
    if needed and node.function.startswith("relate") and node.value_inputs[0] not in RELATIONS:
        raise InputError(
            f"{at}: unknown relation {node.value_inputs[0]!r} (expected one of {', '.join(RELATIONS)})"
        )
    return output
