"""Thin helpers around clingo: controls that collect messages, errors as one-line InputErrors."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import clingo
import clingo.ast as clingo_ast

from clevr_game.errors import InputError

T = TypeVar("T")

# `<string>:3:5-6: error: msg` or `<block>:1:1-14: error: msg`; the span end may carry a line.
_LOCATED = re.compile(r"^[^:\n]*:(\d+):(\d+)(?:-\d+(?::\d+)?)?: (?:error|warning|info): (.*)$")


class MessageLog:
    """A clingo logger that keeps every message, for error reports."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, code: clingo.MessageCode, message: str) -> None:
        self.messages.append(message)

    def first_error(self, name: str) -> str:
        """The first message as `NAME: line L: text` (one line)."""
        for message in self.messages:
            first_line = message.strip().splitlines()[0] if message.strip() else ""
            match = _LOCATED.match(first_line)
            if match:
                return f"{name}: line {match.group(1)}: {match.group(3).strip()}"
        if self.messages:
            return f"{name}: {self.messages[0].strip().splitlines()[0]}"
        return f"{name}: clingo failed"


def new_control(arguments: Sequence[str] = (), log: MessageLog | None = None) -> clingo.Control:
    """A Control whose messages go to `log` (or nowhere), never to stderr."""
    return clingo.Control(list(arguments), logger=log if log is not None else MessageLog(), message_limit=20)


def parse_program(text: str, name: str) -> list[clingo_ast.AST]:
    """Statements of an ASP text; a syntax error becomes InputError naming file and line."""
    log = MessageLog()
    statements: list[clingo_ast.AST] = []
    try:
        clingo_ast.parse_string(text, statements.append, logger=log, message_limit=20)
    except RuntimeError:
        raise InputError(log.first_error(name)) from None
    return statements


def run_clingo(name: str, log: MessageLog, action: Callable[[], T]) -> T:
    """Run a clingo call; its RuntimeError becomes an InputError with the logged location."""
    try:
        return action()
    except RuntimeError:
        raise InputError(log.first_error(name)) from None


def add_statements(control: clingo.Control, statements: Iterable[clingo_ast.AST]) -> None:
    with clingo_ast.ProgramBuilder(control) as builder:
        for statement in statements:
            builder.add(statement)
