"""The baseline executor: dicts and lists, the way CLEVR's reference question engine works.

Kept as the benchmark baseline and as an independent oracle for the fast executor.
It reads a CLEVR scene dict (`objects`, `relationships`) directly.
"""

from __future__ import annotations

from typing import Any

from clevr_game.programs.program import Program
from clevr_game.vocab import ATTRIBUTES

INVALID_ANSWER = "__INVALID__"


def _filter(scene: dict[str, Any], objs: list[int], values: tuple[str, ...]) -> list[int]:
    # Template side inputs come in size, color, material, shape order; empty means "any".
    out = objs
    for attribute, value in zip(ATTRIBUTES, values, strict=False):
        if value:
            out = [i for i in out if scene["objects"][i][attribute] == value]
    return out


def _run_node(scene: dict[str, Any], function: str, args: list[Any], values: tuple[str, ...]) -> Any:
    objects = scene["objects"]
    if function == "scene":
        return list(range(len(objects)))
    if function.startswith("filter_") and function[7:] in ATTRIBUTES:
        attribute = function[7:]
        return [i for i in args[0] if objects[i][attribute] == values[0]]
    if function == "unique":
        return args[0][0] if len(args[0]) == 1 else INVALID_ANSWER
    if function == "relate":
        return list(scene["relationships"][values[0]][args[0]])
    if function == "union":
        return sorted(set(args[0]) | set(args[1]))
    if function == "intersect":
        return sorted(set(args[0]) & set(args[1]))
    if function == "count":
        return len(args[0])
    if function == "exist":
        return len(args[0]) > 0
    if function.startswith("query_"):
        return objects[args[0]][function[6:]]
    if function.startswith("same_"):
        attribute = function[5:]
        me = args[0]
        return [i for i in range(len(objects)) if i != me and objects[i][attribute] == objects[me][attribute]]
    if function in ("equal_integer", "equal_object") or function.startswith("equal_"):
        return args[0] == args[1]
    if function == "less_than":
        return args[0] < args[1]
    if function == "greater_than":
        return args[0] > args[1]
    if function == "filter":
        return _filter(scene, args[0], values)
    if function.startswith("filter_"):  # filter_unique / filter_count / filter_exist
        return _run_node(scene, function[7:], [_filter(scene, args[0], values)], ())
    if function.startswith("relate_filter"):
        related = list(scene["relationships"][values[0]][args[0]])
        filtered = _filter(scene, related, values[1:])
        rest = function[len("relate_filter"):]
        return _run_node(scene, rest[1:], [filtered], ()) if rest else filtered
    raise ValueError(f"unknown function {function!r}")


def reference_execute(program: Program, scene: dict[str, Any]) -> str:
    """Answer string, or INVALID_ANSWER when a node fails (e.g. unique of a non-singleton)."""
    outputs: list[Any] = []
    for node in program:
        args = [outputs[i] for i in node.inputs]
        if any(a == INVALID_ANSWER for a in args):
            return INVALID_ANSWER
        outputs.append(_run_node(scene, node.function, args, node.value_inputs))
    answer = outputs[-1]
    if answer == INVALID_ANSWER or isinstance(answer, list):
        return INVALID_ANSWER
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    return str(answer)


def reference_trace(program: Program, scene: dict[str, Any]) -> list[Any]:
    """Every node's output in program order (object lists, an object index, ints, bools, strings).

    A node that fails, or whose input failed, holds INVALID_ANSWER, so a caller can
    see exactly where a program broke (e.g. which `unique` saw a non-singleton).
    """
    outputs: list[Any] = []
    for node in program:
        args = [outputs[i] for i in node.inputs]
        if any(isinstance(a, str) and a == INVALID_ANSWER for a in args):
            outputs.append(INVALID_ANSWER)
            continue
        outputs.append(_run_node(scene, node.function, args, node.value_inputs))
    return outputs
