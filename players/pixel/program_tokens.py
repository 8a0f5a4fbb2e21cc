"""Programs as token sequences for the question parser: prefix order, self-delimiting.

A program is a tree rooted at its last node; written in prefix order (a node,
then its inputs left to right), each token is a function with its value inputs
(`filter_color[red]`, `relate[left]`, `count`). Every function's arity is known,
so the sequence ends by itself when no input is left open, and a decoder that
only picks tokens which can still be completed within the length limit always
yields a well-formed program. A node that feeds two others is written twice;
the program it reads back computes the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from clevr_game.errors import InputError
from clevr_game.programs import Node, Program
from clevr_game.programs.program import ARITY

PAD_TOKEN = "<pad>"
START_TOKEN = "<start>"
RESERVED = (PAD_TOKEN, START_TOKEN)
"""Ids 0 and 1 of every program-token list."""


def node_token(node: Node) -> str:
    return f"{node.function}[{','.join(node.value_inputs)}]" if node.value_inputs else node.function


def split_token(token: str) -> tuple[str, tuple[str, ...]]:
    """`filter_color[red]` -> ('filter_color', ('red',)); `count` -> ('count', ())."""
    if token.endswith("]") and "[" in token:
        function, values = token[:-1].split("[", 1)
        return function, tuple(values.split(","))
    return token, ()


def token_arity(token: str) -> int:
    """Inputs the token's function takes; InputError for a token that is no function."""
    function, _ = split_token(token)
    if function not in ARITY:
        raise InputError(f"program token {token!r}: unknown function {function!r}")
    return ARITY[function]


def program_to_tokens(program: Program) -> list[str]:
    """The program's tree in prefix order, from its last node."""
    if not program:
        raise InputError("empty program")
    tokens: list[str] = []
    pending = [len(program) - 1]
    while pending:
        index = pending.pop()
        node = program[index]
        tokens.append(node_token(node))
        pending.extend(reversed(node.inputs))  # the first input is read next
    return tokens


def tokens_to_program(tokens: Sequence[str]) -> Program:
    """The program written by `tokens`; InputError when they are not exactly one complete tree."""
    nodes: list[Node] = []
    position = 0

    def read() -> int:
        nonlocal position
        if position >= len(tokens):
            raise InputError(f"program tokens end inside the tree: {' '.join(tokens)}")
        token = tokens[position]
        position += 1
        function, values = split_token(token)
        inputs = tuple(read() for _ in range(token_arity(token)))
        nodes.append(Node(function, inputs, values))
        return len(nodes) - 1

    read()
    if position != len(tokens):
        raise InputError(f"program tokens continue after the tree ends: {' '.join(tokens)}")
    return tuple(nodes)


def token_list(programs: Iterable[Program]) -> list[str]:
    """RESERVED then every token of `programs`, sorted (stable ids for a training set)."""
    seen = {token for program in programs for token in program_to_tokens(program)}
    return list(RESERVED) + sorted(seen)


def encode_programs(programs: Sequence[Program], tokens: Sequence[str], length: int) -> np.ndarray:
    """(N, length) token ids, 0-padded; InputError for an unknown token or a program too long."""
    ids = {token: index for index, token in enumerate(tokens)}
    out = np.zeros((len(programs), length), dtype=np.int64)
    for row, program in enumerate(programs):
        written = program_to_tokens(program)
        if len(written) > length:
            raise InputError(f"program {row} has {len(written)} tokens, more than the parser's {length}")
        for column, token in enumerate(written):
            if token not in ids:
                raise InputError(f"program {row}: token {token!r} is not among the parser's tokens")
            out[row, column] = ids[token]
    return out


def decode_ids(row: Sequence[int], tokens: Sequence[str]) -> Program:
    """The program of one decoded row of ids (padding and reserved ids dropped)."""
    return tokens_to_program([tokens[i] for i in row if i >= len(RESERVED)])


def arities(tokens: Sequence[str]) -> np.ndarray:
    """(V,) inputs of each token; reserved tokens get -1 (never chosen by the decoder)."""
    return np.array([-1 if t in RESERVED else token_arity(t) for t in tokens], dtype=np.int64)
