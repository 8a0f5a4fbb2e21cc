"""The cold path: a program never run before, type-checked and answered in one pass.

Most programs run once (a question answered once, a candidate checked by the
generator, a random one in a test). Building anything for them costs more
than the run itself: `check_program` and the step interpreter's closures take
several times as long as a walk over the nodes. `cold_answer` walks the nodes
once, checking each node's types the way `check_program`'s common case does
and computing its output over the SceneFacts bit sets as it goes, and keeps
nothing. A program that is run again gets the interpreter, then generated code
(executor.CompiledProgram).

Anything unusual (not a Node, a field of an odd type, a bad index) raises
NotPlain instead of an answer: the caller hands the program to the full check,
which either accepts it (then the compiled path answers it) or says exactly what
is wrong. So a program gets an answer here only when `check_program` accepts it,
and the answer is the reference executor's.
"""

from __future__ import annotations

from clevr_game.programs.facts import RELATION_COUNT, SceneFacts
from clevr_game.programs.interpreter import INVALID
from clevr_game.programs.program import Node, Program
from clevr_game.programs.reference import INVALID_ANSWER
from clevr_game.programs.signatures import BOOL, OBJECT_SET, SIGNATURES
from clevr_game.vocab import ATTRIBUTES, RELATIONS


class NotPlain(Exception):
    """The program needs the full check (it may still be well-formed)."""


# Operations; the two that read a relation come last (see _RELATE_KINDS).
(_FILTER, _UNIQUE, _SCENE, _COUNT, _EXIST, _QUERY, _SAME, _UNION, _INTERSECT,
 _EQUAL, _LESS, _GREATER, _TEMPLATE_FILTER, _RELATE, _RELATE_FILTER) = range(15)
_RELATE_KINDS = _RELATE
"""Operations from here on read a relation as their first side input."""

# A template composite's reduction of its narrowed set.
_KEEP, _SINGLE, _BITS, _ANY = range(4)

_RELATION_INDEX = {relation: r for r, relation in enumerate(RELATIONS)}


_Spec = tuple[int, str, str, str, int, int, int, int]


def _spec(function: str) -> _Spec:
    """(arity, first and second input types, output type, side inputs required, operation,
    attribute index, reduction)."""
    inputs, output = SIGNATURES[function]
    attribute, reduction = 0, _KEEP
    if function.startswith("relate_filter") or function in ("filter", "filter_unique", "filter_count",
                                                             "filter_exist"):
        operation = _RELATE_FILTER if function.startswith("relate") else _TEMPLATE_FILTER
        tail = function.rsplit("_", 1)[-1]
        reduction = {"unique": _SINGLE, "count": _BITS, "exist": _ANY}.get(tail, _KEEP)
    elif function.startswith(("filter_", "query_", "same_")):
        prefix, name = function.split("_", 1)
        operation = {"filter": _FILTER, "query": _QUERY, "same": _SAME}[prefix]
        attribute = ATTRIBUTES.index(name)
    elif function.startswith("equal_"):
        operation = _EQUAL
    else:
        operation = {
            "scene": _SCENE, "unique": _UNIQUE, "relate": _RELATE, "count": _COUNT, "exist": _EXIST,
            "union": _UNION, "intersect": _INTERSECT, "less_than": _LESS, "greater_than": _GREATER,
        }[function]
    required = 1 if operation in (_FILTER, _RELATE, _RELATE_FILTER) else 0
    first_type, second_type = (*inputs, "", "")[:2]
    return len(inputs), first_type, second_type, output, required, operation, attribute, reduction


_SPECS = {function: _spec(function) for function in SIGNATURES}


def _narrowed(objects: int, masks: tuple[dict[str, int], ...], side_inputs: tuple[str, ...]) -> int:
    # Template side inputs are size, color, material, shape; "" means any.
    for a, value in enumerate(side_inputs[:4]):
        if value:
            objects &= masks[a].get(value, 0)
    return objects


def cold_answer(program: Program, facts: SceneFacts) -> str:
    """The answer (reference semantics) of a program checked on the way; NotPlain when it needs the full check."""
    if type(program) is not tuple or not program:
        raise NotPlain
    types: list[str] = []
    out: list = []
    masks = facts.masks
    failed = read_failed = False
    try:
        for node in program:
            if type(node) is not Node:
                raise NotPlain
            arity, first_type, second_type, output, required, operation, attribute, reduction = _SPECS[node.function]
            inputs, values = node.inputs, node.value_inputs
            if type(inputs) is not tuple or len(inputs) != arity or type(values) is not tuple:
                raise NotPlain
            if values:
                for value in values:
                    if type(value) is not str:
                        raise NotPlain
                if operation >= _RELATE_KINDS:
                    relation = _RELATION_INDEX[values[0]]
            elif required:
                raise NotPlain
            # Each input an earlier node (a later one is past the end of types) of the expected
            # type (types hold the very strings of SIGNATURES, so identity is equality).
            if arity:
                first = inputs[0]
                if type(first) is not int or first < 0 or types[first] is not first_type:
                    raise NotPlain
                if arity == 2:
                    second = inputs[1]
                    if type(second) is not int or second < 0 or types[second] is not second_type:
                        raise NotPlain
            types.append(output)
            if failed and any(out[source] is INVALID for source in inputs):
                # The reference gives up here; the rest is still type-checked.
                read_failed = True
                out.append(INVALID)
                continue
            # Compute the node (the most frequent operations first).
            if operation == _FILTER:
                out.append(out[first] & masks[attribute].get(values[0], 0))
            elif operation == _SCENE:
                out.append(facts.everything)
            elif operation == _UNIQUE:
                objects = out[first]
                if not objects or objects & (objects - 1):
                    failed = True
                    out.append(INVALID)
                else:
                    out.append(objects.bit_length() - 1)
            elif operation == _RELATE:
                out.append(facts.related[RELATION_COUNT * out[first] + relation])
            elif operation == _QUERY:
                out.append(facts.values[attribute][out[first]])
            elif operation == _COUNT:
                out.append(out[first].bit_count())
            elif operation == _UNION:
                out.append(out[first] | out[second])
            elif operation == _EQUAL:
                out.append(out[first] == out[second])
            elif operation == _INTERSECT:
                out.append(out[first] & out[second])
            elif operation == _SAME:
                obj = out[first]
                # The object's own bit is set in its value's mask: xor takes it out.
                out.append(masks[attribute][facts.values[attribute][obj]] ^ (1 << obj))
            elif operation == _EXIST:
                out.append(out[first] != 0)
            elif operation == _GREATER:
                out.append(out[first] > out[second])
            elif operation == _LESS:
                out.append(out[first] < out[second])
            else:  # a template composite: narrow, then reduce
                if operation == _RELATE_FILTER:
                    objects = _narrowed(facts.related[RELATION_COUNT * out[first] + relation], masks, values[1:])
                else:
                    objects = _narrowed(out[first], masks, values)
                if reduction == _KEEP:
                    out.append(objects)
                elif reduction == _SINGLE:
                    if not objects or objects & (objects - 1):
                        failed = True
                        out.append(INVALID)
                    else:
                        out.append(objects.bit_length() - 1)
                elif reduction == _BITS:
                    out.append(objects.bit_count())
                else:
                    out.append(objects != 0)
    except (KeyError, IndexError, TypeError):  # an unknown function or relation, an input past the nodes before it
        raise NotPlain from None
    final = out[-1]
    if read_failed or final is INVALID or output == OBJECT_SET:
        return INVALID_ANSWER
    if output == BOOL:
        return "yes" if final else "no"
    return final if type(final) is str else str(final)
