"""Reading an environment: validation, its integrity constraints, their English sentences.

An environment text holds `object(0..N-1).` and integrity constraints over the
model's predicates (background.MODEL_PREDICATES), optionally plain rules that
define helper predicates of its own. The `%` comment lines right above a
constraint are its English sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import clingo
import clingo.ast as clingo_ast

from clevr_game.asp.background import MODEL_PREDICATES, SPATIAL_PREDICATES
from clevr_game.asp.clingo_io import parse_program
from clevr_game.asp.regions import NUM_REGIONS
from clevr_game.errors import InputError
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC, Vocabulary

VIOLATED = "violated"

_ALLOWED_STATEMENTS = {
    clingo_ast.ASTType.Program, clingo_ast.ASTType.Comment, clingo_ast.ASTType.Rule,
    clingo_ast.ASTType.Definition, clingo_ast.ASTType.ShowSignature, clingo_ast.ASTType.ShowTerm,
    clingo_ast.ASTType.Defined,
}


@dataclass(frozen=True)
class Constraint:
    """One integrity constraint: its English sentence, ASP text and line in its file."""

    sentence: str
    asp: str
    line: int


@dataclass(frozen=True)
class ParsedProgram:
    statements: tuple[clingo_ast.AST, ...]
    constraints: tuple[Constraint, ...]
    uses_spatial: bool
    helper_rules: int  # plain rules defining predicates other than object/1


QUERY_PREDICATES: tuple[str, ...] = ("query", "missing")
"""A question's answers are the values Q of query(Q) or missing(Q); an environment may not define them."""

RESERVED_PREFIX = "clevr_game_"
"""Predicates the solver adds to a question; user programs may not name them."""

# Directives that make clingo read files or run code while parsing or grounding.
_REACHING_OUT = re.compile(r"#\s*(include|script|external)")


def check_self_contained(text: str, name: str) -> None:
    """InputError unless `text` is plain ASP that reads nothing and runs nothing outside itself.

    clingo reads an `#include`d file while it parses, before any statement can be
    inspected, so the raw text is searched. Only lines that begin with `%` (not
    `%*`) are skipped: those are comments to clingo wherever they stand, since a
    string cannot span lines. Other comments are searched too, which may reject a
    comment that merely names a directive, never miss a real one.
    """
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip(" \t")
        if stripped.startswith("%") and not stripped.startswith("%*"):
            continue
        match = _REACHING_OUT.search(line)
        if match:
            raise InputError(
                f"{name}: line {number}: unsupported statement '#{match.group(1)}' "
                "(a program must be self-contained: no #include, #script or #external)"
            )


def check_no_external_calls(statements: Iterable[clingo_ast.AST], name: str) -> None:
    """InputError for a `#script` block or an `@f(...)` term, which would run code while grounding."""
    for statement in statements:
        where = f"{name}: line {statement.location.begin.line}"
        if statement.ast_type in (clingo_ast.ASTType.Script, clingo_ast.ASTType.External):
            raise InputError(
                f"{where}: unsupported statement (a program must be self-contained: no #include, #script or #external)"
            )
        for node in walk(statement):
            if node.ast_type == clingo_ast.ASTType.Function and node.external:
                raise InputError(f"{where}: unsupported term '@{node.name}' (it calls a function outside the program)")


def parse_self_contained(text: str, name: str) -> list[clingo_ast.AST]:
    """Statements of a user's ASP text that reads no file and runs no code; InputError otherwise."""
    check_self_contained(text, name)
    statements = parse_program(text, name)
    check_no_external_calls(statements, name)
    return statements


def walk(node: clingo_ast.AST) -> Iterator[clingo_ast.AST]:
    yield node
    for key in node.child_keys:
        child = getattr(node, key)
        if child is None:
            continue
        if isinstance(child, clingo_ast.AST):
            yield from walk(child)
        else:
            for item in child:
                yield from walk(item)


def atoms_below(node: clingo_ast.AST) -> Iterator[clingo_ast.AST]:
    """Function nodes used as atoms (predicate name and arguments) below `node`."""
    for sub in walk(node):
        if sub.ast_type != clingo_ast.ASTType.SymbolicAtom:
            continue
        symbol = sub.symbol
        # `p(1;2)` parses as a pool of atoms.
        options = symbol.arguments if symbol.ast_type == clingo_ast.ASTType.Pool else [symbol]
        yield from (s for s in options if s.ast_type == clingo_ast.ASTType.Function)


def is_integrity_constraint(statement: clingo_ast.AST) -> bool:
    if statement.ast_type != clingo_ast.ASTType.Rule:
        return False
    head = statement.head
    return (
        head.ast_type == clingo_ast.ASTType.Literal
        and head.atom.ast_type == clingo_ast.ASTType.BooleanConstant
        and not head.atom.value
    )


def _constant(term: clingo_ast.AST) -> clingo.Symbol | None:
    if term.ast_type == clingo_ast.ASTType.SymbolicTerm:
        return term.symbol
    return None


def check_atom_arguments(atom: clingo_ast.AST, vocabulary: Vocabulary, where: str) -> None:
    """Constants given for attributes, values and regions must exist in the model."""
    args = atom.arguments
    name = atom.name

    def attribute_of(term: clingo_ast.AST) -> str | None:
        symbol = _constant(term)
        if symbol is None:
            return None
        if symbol.type != clingo.SymbolType.Function or symbol.arguments or symbol.name not in ATTRIBUTES:
            raise InputError(f"{where}: unknown attribute '{symbol}' in {name} (expected one of {', '.join(ATTRIBUTES)})")
        return symbol.name

    if (name, len(args)) in (("hasProperty", 3), ("value", 2)):
        attribute = attribute_of(args[-2])
        value = _constant(args[-1])
        if attribute is not None and value is not None:
            allowed = vocabulary.values(attribute)
            if value.type != clingo.SymbolType.Function or value.arguments or value.name not in allowed:
                raise InputError(f"{where}: unknown {attribute} '{value}' in {name} (expected one of {', '.join(allowed)})")
    elif name == "sameProperty" and len(args) == 3:
        attribute_of(args[2])
    elif name == "at" and len(args) == 2:
        region = _constant(args[1])
        if region is not None and (region.type != clingo.SymbolType.Number or not 0 <= region.number < NUM_REGIONS):
            raise InputError(f"{where}: unknown region '{region}' in at (expected 0..{NUM_REGIONS - 1})")


def _sentence_above(lines: list[str], line: int) -> str | None:
    """The `%` comment lines directly above 1-based `line`, joined; None when there are none."""
    collected: list[str] = []
    index = line - 2
    while index >= 0 and lines[index].lstrip().startswith("%") and not lines[index].lstrip().startswith("%*"):
        collected.append(lines[index].lstrip().lstrip("%").strip())
        index -= 1
    text = " ".join(reversed([c for c in collected if c]))
    return text or None


def constraint_of(statement: clingo_ast.AST, lines: list[str], name: str) -> Constraint:
    """The Constraint record of an integrity-constraint statement of the text split into `lines`."""
    line, end = statement.location.begin.line, statement.location.end.line
    asp = " ".join(part.strip() for part in lines[line - 1 : end]).strip()
    sentence = _sentence_above(lines, line) or f"{name} line {line}: {asp}"
    return Constraint(sentence, asp, line)


def constraints_of(statements: tuple[clingo_ast.AST, ...], text: str, name: str) -> tuple[Constraint, ...]:
    lines = text.splitlines()
    return tuple(constraint_of(s, lines, name) for s in statements if is_integrity_constraint(s))


def parse_environment(text: str, name: str, vocabulary: Vocabulary = CLEVR_POC) -> ParsedProgram:
    """Parse and validate an environment text; InputError names `name`, the line and the item."""
    statements = parse_self_contained(text, name)
    lines = text.splitlines()
    defined: set[tuple[str, int]] = set()
    used: list[tuple[clingo_ast.AST, int]] = []
    constraints: list[Constraint] = []
    helper_rules = 0
    for statement in statements:
        line = statement.location.begin.line
        where = f"{name}: line {line}"
        if statement.ast_type not in _ALLOWED_STATEMENTS:
            raise InputError(f"{where}: unsupported statement (an environment holds rules and integrity constraints only)")
        if statement.ast_type == clingo_ast.ASTType.Program and statement.name != "base":
            raise InputError(f"{where}: unsupported '#program {statement.name}' (only the base program is read)")
        if statement.ast_type != clingo_ast.ASTType.Rule:
            continue
        for atom in atoms_below(statement):
            check_atom_arguments(atom, vocabulary, where)
        if is_integrity_constraint(statement):
            constraints.append(constraint_of(statement, lines, name))
        else:
            head = statement.head
            if head.ast_type != clingo_ast.ASTType.Literal or head.atom.ast_type != clingo_ast.ASTType.SymbolicAtom:
                raise InputError(f"{where}: only plain rules and integrity constraints are allowed (no choice or disjunctive heads)")
            for atom in atoms_below(head):
                signature = (atom.name, len(atom.arguments))
                if atom.name in MODEL_PREDICATES and signature != ("object", 1):
                    raise InputError(f"{where}: an environment may not define the model's predicate {atom.name}/{signature[1]}")
                if atom.name in QUERY_PREDICATES and signature[1] == 1:
                    raise InputError(f"{where}: an environment may not define {atom.name}/1 (it holds a question's answers)")
                if atom.name.startswith(RESERVED_PREFIX):
                    raise InputError(f"{where}: predicate names starting with '{RESERVED_PREFIX}' are reserved")
                defined.add(signature)
                helper_rules += signature != ("object", 1)
        for literal in statement.body:
            used.extend((atom, line) for atom in atoms_below(literal))
    uses_spatial = False
    for atom, line in used:
        signature = (atom.name, len(atom.arguments))
        if signature in defined:
            continue
        if atom.name not in MODEL_PREDICATES:
            raise InputError(f"{name}: line {line}: unknown predicate {atom.name}/{signature[1]}")
        if MODEL_PREDICATES[atom.name] != signature[1]:
            raise InputError(
                f"{name}: line {line}: {atom.name} takes {MODEL_PREDICATES[atom.name]} arguments, got {signature[1]}"
            )
        uses_spatial = uses_spatial or atom.name in SPATIAL_PREDICATES
    if ("object", 1) not in defined:
        raise InputError(f"{name}: declares no objects (expected a fact like `object(0..7).`)")
    return ParsedProgram(tuple(statements), tuple(constraints), uses_spatial, helper_rules)


def labelled_violations(statements: tuple[clingo_ast.AST, ...], first_label: int) -> list[clingo_ast.AST]:
    """The statements with each integrity constraint `:- body.` turned into `violated(K) :- body.`.

    Constraints are numbered from `first_label` in order; show statements are dropped
    so the checker's models show only violations.
    """
    out = []
    label = first_label
    for statement in statements:
        if statement.ast_type in (clingo_ast.ASTType.ShowSignature, clingo_ast.ASTType.ShowTerm):
            continue
        if is_integrity_constraint(statement):
            location = statement.location
            term = clingo_ast.SymbolicTerm(location, clingo.Number(label))
            head_atom = clingo_ast.SymbolicAtom(clingo_ast.Function(location, VIOLATED, [term], 0))
            head = clingo_ast.Literal(location, clingo_ast.Sign.NoSign, head_atom)
            statement = statement.update(head=head)
            label += 1
        out.append(statement)
    return out


def _plain_head(statement: clingo_ast.AST) -> tuple[str, int] | None:
    """(name, arity) of a normal rule's head atom; None for constraints, choices and the rest."""
    if statement.ast_type != clingo_ast.ASTType.Rule:
        return None
    head = statement.head
    if head.ast_type != clingo_ast.ASTType.Literal or head.atom.ast_type != clingo_ast.ASTType.SymbolicAtom:
        return None
    symbol = head.atom.symbol
    if symbol.ast_type != clingo_ast.ASTType.Function:
        return None
    return (symbol.name, len(symbol.arguments))


def without_unused_rules(statements: list[clingo_ast.AST]) -> list[clingo_ast.AST]:
    """Drop normal rules whose head no constraint or choice rule depends on, even indirectly.

    Sound for the checker: every choice atom is fixed by assumptions, so atoms nobody
    reads cannot change which constraints are violated; they only cost solving time.
    """
    defining: dict[tuple[str, int], list[clingo_ast.AST]] = {}
    needed: set[tuple[str, int]] = set()
    pending: list[clingo_ast.AST] = []
    for statement in statements:
        head = _plain_head(statement)
        if head is None:
            pending.append(statement)
        else:
            defining.setdefault(head, []).append(statement)
    while pending:
        statement = pending.pop()
        body = statement.body if statement.ast_type == clingo_ast.ASTType.Rule else []
        for literal in body:
            for atom in atoms_below(literal):
                signature = (atom.name, len(atom.arguments))
                if signature not in needed:
                    needed.add(signature)
                    pending.extend(defining.get(signature, []))
        if statement.ast_type == clingo_ast.ASTType.Rule and _plain_head(statement) is None:
            # Choice heads carry conditions (`: value(A, V)`), which are needed too.
            for atom in atoms_below(statement.head):
                signature = (atom.name, len(atom.arguments))
                if signature not in needed:
                    needed.add(signature)
                    pending.extend(defining.get(signature, []))
    return [s for s in statements if _plain_head(s) is None or _plain_head(s) in needed]
