"""The fast executor: programs compiled once, run on precomputed scene facts.

    facts = compile_scene(scene)            # or SceneFacts.from_arrays(...) per move
    execute(program, facts) -> "yes" / "3" / "red" / INVALID_ANSWER
    execute_trace(program, facts) -> every node's output

Answers are exactly those of `reference_execute` (the spec). A program is type
checked when compiled, so a well-formed program never raises when executed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from clevr_game.errors import InputError
from clevr_game.programs.codegen import answer_source, trace_source
from clevr_game.programs.facts import SceneFacts, compile_scene, compile_scene_dict
from clevr_game.programs.program import Node, Program
from clevr_game.programs.reference import INVALID_ANSWER
from clevr_game.programs.signatures import check_program
from clevr_game.scene import Scene


class _Invalid:
    """The output of a failed node in a trace (distinct from every real output)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INVALID"

    def __reduce__(self) -> str:
        # Pickled by name, so a trace sent to a worker process keeps the singleton.
        return "INVALID"


INVALID = _Invalid()


def _single(mask: int) -> int | _Invalid:
    """The index of the only object of `mask`, or INVALID when it has not exactly one."""
    if not mask or mask & (mask - 1):
        return INVALID
    return mask.bit_length() - 1


class CompiledProgram:
    """A type-checked program with its generated `answer` and `trace` functions."""

    __slots__ = ("program", "types", "answer", "trace", "source")

    def __init__(self, program: Program) -> None:
        self.program = program
        self.types: list[str] = check_program(program)
        self.source = answer_source(program, self.types) + "\n\n" + trace_source(program)
        namespace: dict[str, Any] = {"INVALID": INVALID, "INVALID_ANSWER": INVALID_ANSWER, "single": _single}
        exec(compile(self.source, "<compiled clevr program>", "exec"), namespace)  # noqa: S102
        self.answer: Callable[[SceneFacts], str] = namespace["answer"]
        self.trace: Callable[[SceneFacts], list[Any]] = namespace["trace"]

    def __repr__(self) -> str:
        return f"CompiledProgram({len(self.program)} nodes, answers {self.types[-1]})"


@functools.lru_cache(maxsize=8192)
def _compile_cached(program: Program) -> CompiledProgram:
    return CompiledProgram(program)


def compile_program(program: Program | Sequence[Node]) -> CompiledProgram:
    """Type-check and compile once (cached by program); InputError names the bad node."""
    program = tuple(program)
    try:
        hash(program)
    except TypeError:
        check_program(program)  # names the node holding the unhashable field
        raise InputError("program: a node holds an unhashable field") from None
    return _compile_cached(program)


# execute() is called once per move: hashing a Program (a tuple of dataclasses, hashed
# in Python) would cost more than running it, so recent programs are found by
# identity. The program is kept in the entry, so its id cannot be reused meanwhile.
_BY_IDENTITY: dict[int, tuple[Program, CompiledProgram]] = {}
_BY_IDENTITY_LIMIT = 4096


def _compiled(program: Program | Sequence[Node]) -> CompiledProgram:
    entry = _BY_IDENTITY.get(id(program))
    if entry is not None and entry[0] is program:
        return entry[1]
    compiled = compile_program(program)
    if type(program) is tuple:  # a list could change after being cached
        if len(_BY_IDENTITY) >= _BY_IDENTITY_LIMIT:
            _BY_IDENTITY.clear()
        _BY_IDENTITY[id(program)] = (program, compiled)
    return compiled


def execute(program: Program, facts: SceneFacts) -> str:
    """The answer string, or INVALID_ANSWER; the same as `reference_execute`."""
    entry = _BY_IDENTITY.get(id(program))
    if entry is not None and entry[0] is program:
        return entry[1].answer(facts)
    return _compiled(program).answer(facts)


def execute_trace(program: Program, facts: SceneFacts) -> list[Any]:
    """Every node's output: sets as int bit sets, objects as indices, ints, bools, strings; INVALID where failed."""
    return _compiled(program).trace(facts)


def execute_scene(program: Program, scene: Scene | dict[str, Any]) -> str:
    """Compile the scene (a Scene or a CLEVR scene dict) and execute: for one-off answers."""
    facts = compile_scene(scene) if isinstance(scene, Scene) else compile_scene_dict(scene)
    return execute(program, facts)
