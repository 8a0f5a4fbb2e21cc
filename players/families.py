"""The question family (CLEVR 1.0's template file) of a question, from its program when the file is not named.

CLEVR's own question files carry `question_family_index` but no
`template_filename`, and the index follows the order in which CLEVR's generator
happened to list its template folder, so it names no family by itself. The
program does: each of the nine template files writes a characteristic sequence
of functions, checked here in this order (the first rule that matches wins):

- `same_<attribute>`                                  -> same_relate
- `equal_integer`, `less_than`, `greater_than`        -> compare_integer
- `equal_<attribute>` (two objects' values compared)  -> comparison
- `intersect`                                         -> single_and
- `union`                                             -> single_or
- 0, 1, 2 or 3 `relate` nodes on the chain from the answer back to `scene`
                                                      -> zero_hop, one_hop, two_hop, three_hop

The same rules read expanded programs (CLEVR question JSON) and template-form
ones (`relate_filter_count` counts as a hop), so the project's own templates and
CLEVR's both map to the nine names.
"""

from __future__ import annotations

from pathlib import Path

from clevr_game.dataset import Question
from clevr_game.programs import Program
from clevr_game.vocab import ATTRIBUTES

FAMILIES: tuple[str, ...] = (
    "compare_integer", "comparison", "one_hop", "same_relate", "single_and", "single_or",
    "three_hop", "two_hop", "zero_hop",
)
"""CLEVR 1.0's nine template families, by template file stem."""

HOP_FAMILIES: tuple[str, ...] = ("zero_hop", "one_hop", "two_hop", "three_hop")

_SAME = frozenset(f"same_{a}" for a in ATTRIBUTES)
_INTEGER_COMPARISONS = frozenset({"equal_integer", "less_than", "greater_than"})
_VALUE_COMPARISONS = frozenset(f"equal_{a}" for a in ATTRIBUTES)


def _is_hop(function: str) -> bool:
    return function == "relate" or function.startswith("relate_filter")


def family_from_program(program: Program) -> str | None:
    """The CLEVR template family whose programs have this shape, or None for a shape none of them writes."""
    if not program:
        return None
    functions = {node.function for node in program}
    if functions & _SAME:
        return "same_relate"
    if functions & _INTEGER_COMPARISONS:
        return "compare_integer"
    if functions & _VALUE_COMPARISONS:
        return "comparison"
    if "intersect" in functions:
        return "single_and"
    if "union" in functions:
        return "single_or"
    hops, node = 0, program[-1]
    while node.inputs:
        hops += _is_hop(node.function)
        node = program[node.inputs[0]]
    return HOP_FAMILIES[hops] if hops < len(HOP_FAMILIES) else None


def question_family(question: Question) -> str:
    """The family a question's per-family scores go under.

    Its `template_filename` stem when the file names one; else the family its
    program's shape gives; else its `question_family_index` as text; else `unknown`.
    """
    template = question.raw.get("template_filename")
    if isinstance(template, str) and template:
        return Path(template).stem
    inferred = family_from_program(question.program)
    if inferred is not None:
        return inferred
    return str(question.family) if question.family is not None else "unknown"
