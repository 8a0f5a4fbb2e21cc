"""Python source for one program: straight-line code over SceneFacts bit sets.

A program that keeps being run (every move of the game re-runs one) is turned
into a plain Python function: no interpreter loop, no per-node call, each node
one expression of int arithmetic on local variables. Only names chosen here and
`repr`-quoted string literals reach the source, so no program content can
inject code.

`answer(facts)` returns INVALID_ANSWER as soon as a unique-type node with a
reader fails (the reference executor gives up when the next node reads the
failed output); nodes nobody reads are skipped, nodes read once are inlined.
"""

from __future__ import annotations

from collections import Counter

from clevr_game.programs.facts import KNOWN_VALUES, RELATION_COUNT
from clevr_game.programs.program import Node, Program
from clevr_game.programs.signatures import (
    ATTRIBUTE_TYPES,
    BOOL,
    INTEGER,
    OBJECT,
    OBJECT_SET,
    UNIQUE_FUNCTIONS,
)
from clevr_game.vocab import ATTRIBUTES, RELATIONS

_COMPARISONS = {"less_than": "<", "greater_than": ">"}

# Facts read once at the top of a generated function, by the local name the body uses.
_PROLOGUE = {"E": "facts.everything", "R": "facts.related"}
_PROLOGUE.update({f"M{a}": f"facts.masks[{a}]" for a in range(len(ATTRIBUTES))})
_PROLOGUE.update({f"V{a}": f"facts.values[{a}]" for a in range(len(ATTRIBUTES))})


class _Emitter:
    """Turns nodes into Python expressions, recording which facts they read."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def _use(self, name: str) -> str:
        self.used.add(name)
        return name

    def _mask(self, attribute: str, value: str) -> str:
        a = ATTRIBUTES.index(attribute)
        if value in KNOWN_VALUES[a]:
            return f"{self._use(f'M{a}')}[{value!r}]"
        # No key for it (a value of no vocabulary, or ""): an object could still
        # carry it only in a vocabulary made up at run time.
        return f"{self._use(f'M{a}')}.get({value!r}, 0)"

    def _filtered(self, base: str, side_inputs: tuple[str, ...]) -> str:
        # Template side inputs are size, color, material, shape; "" means any.
        terms = [base] + [
            self._mask(attribute, value)
            for attribute, value in zip(ATTRIBUTES, side_inputs, strict=False)
            if value
        ]
        return " & ".join(terms)

    def _related(self, relation: str, source: str) -> str:
        return f"{self._use('R')}[{RELATION_COUNT} * {source} + {RELATIONS.index(relation)}]"

    def object_set(self, node: Node, args: list[str]) -> str:
        """The set expression of a node whose result is (or is reduced from) a set."""
        function, values = node.function, node.value_inputs
        if function == "scene":
            return self._use("E")
        if function.startswith("relate_filter"):
            return self._filtered(self._related(values[0], args[0]), values[1:])
        if function == "relate":
            return self._related(values[0], args[0])
        if function == "filter" or function in ("filter_unique", "filter_count", "filter_exist"):
            return self._filtered(args[0], values)
        if function.startswith("filter_"):
            return f"{args[0]} & {self._mask(function[7:], values[0])}"
        if function.startswith("same_"):
            # The object's own bit is set in its value's mask: xor takes it out.
            a = ATTRIBUTES.index(function[5:])
            return f"{self._use(f'M{a}')}[{self._use(f'V{a}')}[{args[0]}]] ^ (1 << {args[0]})"
        if function == "union":
            return f"{args[0]} | {args[1]}"
        if function == "intersect":
            return f"{args[0]} & {args[1]}"
        # unique, count, exist reduce their input set as it is.
        return args[0]

    def value(self, node: Node, args: list[str]) -> str:
        """The expression of a node that cannot fail (everything but the unique kind)."""
        function = node.function
        if function.startswith("query_"):
            return f"{self._use(f'V{ATTRIBUTES.index(function[6:])}')}[{args[0]}]"
        if function.startswith("equal_"):
            return f"{args[0]} == {args[1]}"
        if function in _COMPARISONS:
            return f"{args[0]} {_COMPARISONS[function]} {args[1]}"
        if function in ("count", "filter_count", "relate_filter_count"):
            return f"({self.object_set(node, args)}).bit_count()"
        if function in ("exist", "filter_exist", "relate_filter_exist"):
            return f"({self.object_set(node, args)}) != 0"
        return self.object_set(node, args)

    def prologue(self) -> list[str]:
        return [f"    {name} = {_PROLOGUE[name]}" for name in sorted(self.used)]


def _final_return(kind: str, expression: str) -> str:
    if kind == BOOL:
        return f'    return "yes" if {expression} else "no"'
    if kind in (INTEGER, OBJECT):
        return f"    return str({expression})"
    if kind in ATTRIBUTE_TYPES.values():
        return f"    return {expression}"
    raise AssertionError(f"no answer for type {kind}")  # an ObjectSet never gets here


def answer_source(program: Program, types: list[str]) -> str:
    """Source of `def answer(facts) -> str`."""
    last = len(program) - 1
    if types[last] == OBJECT_SET:
        # A set is never an answer, and nothing else can raise: the outcome is known.
        return "def answer(facts):\n    return INVALID_ANSWER\n"
    uses = Counter(source for node in program for source in node.inputs)
    emitter = _Emitter()
    body: list[str] = []
    # A node that cannot fail and is read once goes into its reader's expression.
    inlined: dict[int, str] = {}
    for index, node in enumerate(program):
        if not uses[index] and index != last:
            continue
        name = f"v{index}"
        args = [f"({inlined[source]})" if source in inlined else f"v{source}" for source in node.inputs]
        if node.function in UNIQUE_FUNCTIONS:
            body += [
                f"    {name} = {emitter.object_set(node, args)}",
                f"    if not {name} or {name} & ({name} - 1):",
                "        return INVALID_ANSWER",
                f"    {name} = {name}.bit_length() - 1",
            ]
        elif index == last:
            body.append(_final_return(types[last], f"({emitter.value(node, args)})"))
        elif uses[index] == 1:
            inlined[index] = emitter.value(node, args)
        else:
            body.append(f"    {name} = {emitter.value(node, args)}")
    if program[last].function in UNIQUE_FUNCTIONS:
        body.append(_final_return(types[last], f"v{last}"))
    return "\n".join(["def answer(facts):", *emitter.prologue(), *body]) + "\n"
