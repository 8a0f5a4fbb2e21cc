"""The fast executor: programs compiled once, run on precomputed scene facts.

    facts = compile_scene(scene)            # or SceneFacts.from_arrays / facts.with_coords per move
    execute(program, facts) -> "yes" / "3" / "red" / INVALID_ANSWER
    execute_trace(program, facts) -> every node's output

Answers are exactly those of `reference_execute` (the spec). A program is type
checked when compiled, so a well-formed program never raises when executed.

Three tiers. `execute` answers a program it has not seen (by identity) on the
cold path, which type-checks and computes in one walk and builds nothing
(cold.py); a program run again is compiled: the step interpreter (built in
microseconds), then, after HOT_AFTER answers, generated Python code (about a
hundred microseconds to compile, several times faster per run). One-off
programs (a question answered once, a candidate checked by the generator)
never pay for building anything; the game's programs, run on every move, get
generated code early.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Sequence
from types import CodeType, FunctionType
from typing import Any

from clevr_game.errors import InputError
from clevr_game.programs.codegen import answer_source
from clevr_game.programs.cold import NotPlain, cold_answer
from clevr_game.programs.facts import SceneFacts, compile_scene, compile_scene_dict
from clevr_game.programs.interpreter import INVALID, Interpreter
from clevr_game.programs.program import Node, Program
from clevr_game.programs.reference import INVALID_ANSWER
from clevr_game.programs.signatures import check_program
from clevr_game.scene import Scene

__all__ = [
    "HOT_AFTER", "INVALID", "CompiledProgram", "compile_program",
    "execute", "execute_scene", "execute_trace",
]

HOT_AFTER = 32
"""Answers on the interpreter before a program gets generated code."""


# Every generated function reads its globals from this one dict (only
# INVALID_ANSWER is read): thousands of hot programs share it instead of
# carrying a namespace each.
_GENERATED_GLOBALS: dict[str, Any] = {"INVALID_ANSWER": INVALID_ANSWER, "__builtins__": builtins}


class CompiledProgram:
    """A type-checked program. `answer(facts)` and `trace(facts)` run it.

    `answer` is an attribute holding the current tier's function, so the hot
    call is one attribute read; `generate()` switches to generated code now.
    `interpreter.answer` stays on the interpreter (for a caller that knows a
    program will not be run often enough to pay for code generation).
    """

    __slots__ = ("program", "types", "answer", "interpreter", "_runs", "_generated", "_source")

    def __init__(self, program: Program) -> None:
        self.program = program
        self.types: list[str] = check_program(program)
        self.interpreter = Interpreter(program, self.types)
        self._runs = 0
        self._generated: Callable[[SceneFacts], str] | None = None
        self._source: str | None = None
        self.answer: Callable[[SceneFacts], str] = self._warming_up

    def _warming_up(self, facts: SceneFacts) -> str:
        self._runs += 1
        if self._runs >= HOT_AFTER:
            self.generate()
        return self.interpreter.answer(facts)

    def generate(self) -> Callable[[SceneFacts], str]:
        """Compile the generated code (once) and answer with it from now on."""
        if self._generated is None:
            module = compile(self.source, "<compiled clevr program>", "exec")
            (code,) = [c for c in module.co_consts if isinstance(c, CodeType)]
            self._generated = FunctionType(code, _GENERATED_GLOBALS, "answer")
        self.answer = self._generated
        return self._generated

    @property
    def source(self) -> str:
        """The generated Python source of `answer`."""
        if self._source is None:
            self._source = answer_source(self.program, self.types)
        return self._source

    def interpreted_answer(self, facts: SceneFacts) -> str:
        """The answer by the interpreter, whatever the tier (for cross-checks)."""
        return self.interpreter.answer(facts)

    def trace(self, facts: SceneFacts) -> list[Any]:
        """Every node's output: sets as int bit sets, objects as indices, ints, bools, strings; INVALID where failed."""
        return self.interpreter.trace(facts)

    def __repr__(self) -> str:
        tier = "generated" if self.answer is self._generated else "interpreted"
        return f"CompiledProgram({len(self.program)} nodes, answers {self.types[-1]}, {tier})"


_CACHE_SIZE = 1 << 15


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile_cached(program: Program) -> CompiledProgram:
    return CompiledProgram(program)


def compile_program(program: Program | Sequence[Node]) -> CompiledProgram:
    """Type-check and compile once (cached by program); InputError names the bad node.

    A tuple compiled here is found by identity when `execute` runs it.
    """
    given = program
    program = tuple(program)
    try:
        hash(program)
    except TypeError:
        check_program(program)  # names the node holding the unhashable field
        raise InputError("program: a node holds an unhashable field") from None
    compiled = _compile_cached(program)
    if compiled.program is not program:
        # Found by equality, which is not enough: 0.0 == 0 and True == 1, and the check refuses both.
        check_program(program)
    if program is given:  # a tuple (tuple() of a list is a new object, and a list could change)
        if len(_BY_IDENTITY) >= _CACHE_SIZE:
            _BY_IDENTITY.clear()
        _BY_IDENTITY[id(program)] = (program, compiled)
    return compiled


# execute() runs once per move: hashing a Program (a tuple of dataclasses, hashed in
# Python) costs more than running it, so programs are found by identity first. The
# program is kept in its entry, so its id cannot be reused while the entry lives.
_BY_IDENTITY: dict[int, tuple[Program, CompiledProgram]] = {}
_NOT_FOUND = (object(), None)  # its first item is no program

# Programs answered once on the cold path, by identity: seen again, they are compiled.
# Kept apart from _BY_IDENTITY, so that a stream of one-off programs does not push the
# compiled ones out; as large, so that a pool of programs run in turn gets compiled.
_SEEN_ONCE: dict[int, Program] = {}


def _compiled(program: Program | Sequence[Node]) -> CompiledProgram:
    entry = _BY_IDENTITY.get(id(program))
    if entry is not None and entry[0] is program:
        return entry[1]
    return compile_program(program)


def execute(program: Program, facts: SceneFacts) -> str:
    """The answer string, or INVALID_ANSWER; the same as `reference_execute`."""
    key = id(program)
    kept, compiled = _BY_IDENTITY.get(key, _NOT_FOUND)
    if kept is program:
        return compiled.answer(facts)
    if _SEEN_ONCE.get(key) is program:  # run again: compiled from now on
        return compile_program(program).answer(facts)
    try:
        answer = cold_answer(program, facts)
    except NotPlain:  # the full check: an InputError naming the node, or a list, or an unusual but valid program
        return compile_program(program).answer(facts)
    if len(_SEEN_ONCE) >= _CACHE_SIZE:
        _SEEN_ONCE.clear()
    _SEEN_ONCE[key] = program
    return answer


def execute_trace(program: Program, facts: SceneFacts) -> list[Any]:
    """Every node's output: sets as int bit sets, objects as indices, ints, bools, strings; INVALID where failed."""
    return _compiled(program).trace(facts)


def execute_scene(program: Program, scene: Scene | dict[str, Any]) -> str:
    """Compile the scene (a Scene or a CLEVR scene dict) and execute: for one-off answers."""
    facts = compile_scene(scene) if isinstance(scene, Scene) else compile_scene_dict(scene)
    return execute(program, facts)
