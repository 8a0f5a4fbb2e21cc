"""A template with its params filled in -> the primitive CLEVR program, exactly as CLEVR's questions store it.

Composites expand in place: `filter_unique` -> one `filter_<attr>` per set value
(size, color, material, shape order) then `unique`; `relate_filter_*` starts with
`relate`. Empty values emit nothing, so a composite with none reduces to its tail.
"""

from __future__ import annotations

from collections.abc import Mapping

from clevr_game.programs.program import Node, Program
from clevr_game.questions.evaluate import tail_of
from clevr_game.questions.templates import COMPOSITES, Template
from clevr_game.vocab import ATTRIBUTES


def expand_program(template: Template, values: Mapping[str, str | None]) -> Program:
    """The primitive program (function / inputs / value_inputs) of `template` under `values`."""
    nodes: list[Node] = []
    position: list[int] = []  # template node -> index of the expanded node giving its output
    for node in template.nodes:
        inputs = tuple(position[j] for j in node.inputs)
        if node.function not in COMPOSITES:
            value_inputs = tuple(values[name] or "" for name in node.value_inputs)
            nodes.append(Node(node.function, inputs, value_inputs))
            position.append(len(nodes) - 1)
            continue
        current = inputs[0]
        names = node.value_inputs
        if node.function.startswith("relate"):
            nodes.append(Node("relate", (current,), (values[names[0]] or "",)))
            current = len(nodes) - 1
            names = names[1:]
        for attribute, name in zip(ATTRIBUTES, names, strict=True):
            value = values[name]
            if value:
                nodes.append(Node(f"filter_{attribute}", (current,), (value,)))
                current = len(nodes) - 1
        tail = tail_of(node.function)
        if tail:
            nodes.append(Node(tail, (current,)))
            current = len(nodes) - 1
        position.append(current)
    return tuple(nodes)
