"""Template nodes on scene bitmasks, and the rules a generated question must satisfy.

Values: an object set is an int bitmask, an object its index, then ints, bools
and attribute strings. `check_instance` judges a complete param assignment
node by node; the search (search.py) applies the same rules while it chooses
params, and the tests hold the two against each other.

Two rule sets, one per sampling (generator.py). CLEVR's (`clevr`): every `unique`
sees one object; NULL, NEQ and OUT_NEQ constraints, OUT_NEQ on the two nodes'
outputs (two counts must differ, not only the sets counted); an answer, never
INVALID; a raw `relate` is not degenerate (replacing its output by the whole
scene changes the answer); a `relate_filter` names objects of the scene, and
one that is not `_count` / `_exist` keeps some of them. `minimal` adds:
- no redundant filter value: dropping any value of a filter changes its match set;
- no redundant relation: a `relate_filter` key also matches something the relation rules out;
- a template `filter_<attr>` node removes something; a plain `filter` sets a value;
- neither side of a `union` / `intersect` contains the other (one side would add nothing);
and OUT_NEQ compares the selections (match sets) instead of the outputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clevr_game.questions.facts import GenerationFacts
from clevr_game.questions.templates import COMPOSITES, SET, Template, output_type
from clevr_game.vocab import ATTRIBUTES, RELATIONS


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()
"""The output of a node that fails (e.g. `unique` of a set that is not a singleton)."""

ATTRIBUTE_POSITION = {a: i for i, a in enumerate(ATTRIBUTES)}

SAMPLINGS = ("clevr", "minimal")
"""How params are drawn, and so which rules a question keeps (see above and generator.py)."""


class Rejected(Exception):
    """A param assignment breaks a rule; the message says which."""


def format_answer(value: Any) -> str | None:
    """The CLEVR answer string of a final output, None when it is not an answer."""
    if value is INVALID:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return value


def tail_of(function: str) -> str:
    """`unique` / `count` / `exist` for a composite that ends in one, else ``."""
    tail = function.rsplit("_", 1)[-1]
    return tail if tail in ("unique", "count", "exist") else ""


def finish_selection(tail: str, matched: int) -> Any:
    """A composite's output from its match set."""
    if tail == "unique":
        return matched.bit_length() - 1 if matched and not matched & (matched - 1) else INVALID
    if tail == "count":
        return matched.bit_count()
    if tail == "exist":
        return matched != 0
    return matched


def apply_fixed(function: str, args: Sequence[Any], facts: GenerationFacts, strict: bool = True) -> Any:
    """A node without side inputs; INVALID when it fails or (strict) breaks the union/intersect rule."""
    if function == "scene":
        return facts.all
    if function == "unique":
        return finish_selection("unique", args[0])
    if function in ("union", "intersect"):
        a, b = args
        if strict and (a & ~b == 0 or b & ~a == 0):
            return INVALID
        return a | b if function == "union" else a & b
    if function == "count":
        return args[0].bit_count()
    if function == "exist":
        return args[0] != 0
    if function == "less_than":
        return args[0] < args[1]
    if function == "greater_than":
        return args[0] > args[1]
    if function.startswith("equal_"):
        return args[0] == args[1]
    if function.startswith("query_"):
        return facts.values[args[0]][ATTRIBUTE_POSITION[function[6:]]]
    if function.startswith("same_"):
        return facts.same[function[5:]][args[0]]
    raise ValueError(f"{function} takes side inputs or is unknown")


def evaluate(
    template: Template,
    facts: GenerationFacts,
    values: Mapping[str, str | None],
    strict: bool = True,
    override: Mapping[int, Any] | None = None,
    sampling: str = "minimal",
) -> tuple[list[Any], list[Any]]:
    """(outputs, selections) of every template node under a complete assignment.

    A composite's selection is its match set (`minimal` OUT_NEQ compares selections, so
    "the number of cubes" and "the number of spheres" differ as sets even when
    the counts agree). Strict: every rule of `sampling` is checked and Rejected raised;
    otherwise only failures (INVALID outputs) raise.
    """
    clevr = sampling == "clevr"
    minimal = strict and not clevr
    table = facts.table
    key_masks = facts.key_masks
    outputs: list[Any] = []
    selections: list[Any] = []
    out_neq = [c.params for c in template.constraints if c.kind == "OUT_NEQ"] if strict else []
    compared = outputs if clevr else selections
    for i, node in enumerate(template.nodes):
        if override is not None and i in override:
            outputs.append(override[i])
            selections.append(override[i])
            continue
        function = node.function
        args = [outputs[j] for j in node.inputs]
        if function in COMPOSITES:
            names = node.value_inputs
            if function.startswith("relate"):
                within = facts.relate[values[names[0]]][args[0]]
                names = names[1:]
            else:
                within = args[0]
            key = table.index[tuple(values[n] for n in names)]
            matched = within & key_masks[key]
            if minimal:
                if function == "filter" and key == 0:
                    raise Rejected(f"node {i}: a plain filter without any value")
                if any(within & key_masks[d] == matched for d in table.drop_one[key]):
                    raise Rejected(f"node {i}: a redundant filter value")
                if function.startswith("relate") and key_masks[key] & ~within == 0:
                    raise Rejected(f"node {i}: the relation removes nothing")
            # CLEVR's generator emits no node for an empty filter and reads the node before it
            # instead: only the same set answers as the expanded program does.
            if (clevr and function == "filter" and key == 0 and node.inputs[0] != i - 1
                    and (output_type(template.nodes[i - 1].function) != SET or outputs[i - 1] != within)):
                raise Rejected(f"node {i}: an empty filter whose input is not the node before it")
            if strict and clevr and function.startswith("relate"):
                if key_masks[key] == 0:
                    raise Rejected(f"node {i}: the relation's filter describes no object of the scene")
                if function == "relate_filter" and matched == 0:
                    raise Rejected(f"node {i}: the relation's filter keeps nothing")
            output = finish_selection(tail_of(function), matched)
            selection = matched
        elif function == "relate":
            output = selection = facts.relate[values[node.value_inputs[0]]][args[0]]
        elif function.startswith("filter_"):
            attribute = function[7:]
            output = selection = args[0] & facts.value_masks[attribute][values[node.value_inputs[0]]]
            if minimal and output == args[0]:
                raise Rejected(f"node {i}: {function} removes nothing")
        else:
            output = selection = apply_fixed(function, args, facts, minimal)
        if output is INVALID:
            raise Rejected(f"node {i}: {function} fails")
        outputs.append(output)
        selections.append(selection)
        for a, b in out_neq:
            if max(a, b) == i and compared[a] == compared[b]:
                what = "give the same output" if clevr else "select the same objects"
                raise Rejected(f"OUT_NEQ: nodes {a} and {b} {what}")
    return outputs, selections


def answer_under(
    template: Template, facts: GenerationFacts, values: Mapping[str, str | None], override: Mapping[int, Any],
    sampling: str = "minimal",
) -> str | None:
    """The answer with some node outputs replaced, None when the program then fails."""
    try:
        outputs, _ = evaluate(template, facts, values, strict=False, override=override, sampling=sampling)
    except Rejected:
        return None
    return format_answer(outputs[-1])


def is_degenerate(
    template: Template, facts: GenerationFacts, values: Mapping[str, str | None], answer: str,
    sampling: str = "minimal",
) -> bool:
    """CLEVR's check: a raw `relate` whose replacement by the whole scene keeps the answer is not needed."""
    for i, node in enumerate(template.nodes):
        if node.function == "relate" and answer_under(template, facts, values, {i: facts.all}, sampling) == answer:
            return True
    return False


def check_instance(
    template: Template, facts: GenerationFacts, values: Mapping[str, str | None], sampling: str = "minimal"
) -> str:
    """The answer of a complete assignment; Rejected (with the broken rule) when it is not a valid question
    under the rules of `sampling`."""
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling {sampling!r}: expected one of {', '.join(SAMPLINGS)}")
    for name, kind in template.params.items():
        if name not in values:
            raise Rejected(f"param {name} is missing")
        allowed = RELATIONS if kind == "relation" else facts.vocabulary.values(kind)
        if values[name] is not None and values[name] not in allowed:
            raise Rejected(f"param {name}: {values[name]!r} is not a {kind}")
    for node in template.nodes:
        if node.function not in COMPOSITES:
            for name in node.value_inputs:  # relate and template filter_<attr> nodes need a value
                if values[name] is None:
                    raise Rejected(f"param {name} of {node.function} is empty")
    for constraint in template.constraints:
        if constraint.kind == "NULL" and values[constraint.params[0]] is not None:
            raise Rejected(f"NULL: {constraint.params[0]} has a value")
        if constraint.kind == "NEQ":
            a, b = (values[p] for p in constraint.params)
            if a is not None and a == b:
                raise Rejected(f"NEQ: {constraint.params[0]} and {constraint.params[1]} are both {a}")
    outputs, _ = evaluate(template, facts, values, sampling=sampling)
    answer = format_answer(outputs[-1])
    if answer is None:
        raise Rejected("no answer")
    if is_degenerate(template, facts, values, answer, sampling):
        raise Rejected("a relate node is degenerate")
    return answer
