"""Hidden-object questions answered by brave reasoning: every value the query takes in some stable model.

The program is the background, the environment, the partial scene as facts
(`visible/1`, `hasProperty/3`, `at/2` and the spatial relations between visible
objects) and the question's rule, whose head is `query(Q)` or `missing(Q)`.
Objects of the environment that the partial scene does not show are
`hidden/1`: their attributes and regions stay open.

A question is user input: like an environment it may not `#include`, `#script`,
`#external` or call `@functions`, and its answers must lie in the vocabulary of
the attribute it asks (ParsedQuestion), or solving fails with one line.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import clingo
import clingo.ast as clingo_ast
import numpy as np

from clevr_game.asp.background import SPATIAL_PREDICATES
from clevr_game.asp.clingo_io import parse_program
from clevr_game.asp.environment import Environment
from clevr_game.asp.parsing import (
    QUERY_PREDICATES,
    RESERVED_PREFIX,
    atoms_below,
    check_atom_arguments,
    parse_self_contained,
    walk,
)
from clevr_game.asp.regions import NUM_REGIONS, regions_of
from clevr_game.errors import InputError
from clevr_game.scene import Scene
from clevr_game.vocab import ATTRIBUTES, RELATIONS

ANSWER_VALUE = f"{RESERVED_PREFIX}answer_value"
OUTSIDE_VOCABULARY = f"{RESERVED_PREFIX}outside_vocabulary"


def scene_regions(scene: Scene, name: str) -> list[int]:
    """The region of each object's centre; a stored `region` field must agree with it.

    Coordinates decide because a moved object keeps whatever field it was given:
    trusting the field would judge a move with the region the object has left.
    """
    from_coords = regions_of(scene.coords(), scene.directions).tolist() if len(scene) else []
    for i, (obj, region) in enumerate(zip(scene.objects, from_coords, strict=True)):
        if "region" not in obj.extra:
            continue
        stored = obj.extra["region"]
        if isinstance(stored, bool) or not isinstance(stored, int) or not 0 <= stored < NUM_REGIONS:
            raise InputError(f"{name}: object {i}: region must be an integer 0..{NUM_REGIONS - 1}, got {stored!r}")
        if stored != region:
            raise InputError(
                f"{name}: object {i}: region {stored} disagrees with its 3d_coords, which lie in region {region}"
            )
    return from_coords


def partial_scene_facts(
    scene: Scene, environment: Environment, name: str = "<scene>", *, relations: bool = True
) -> str:
    """ASP facts for the visible objects 0..K-1 of a partial scene (`relations`: also left/2 ...)."""
    if len(scene) > environment.num_objects:
        raise InputError(
            f"{name}: the scene shows {len(scene)} objects but {environment.name} has only {environment.num_objects}"
        )
    facts = []
    for i, (obj, region) in enumerate(zip(scene.objects, scene_regions(scene, name), strict=True)):
        facts.append(f"visible({i}). at({i}, {region}).")
        for attribute in ATTRIBUTES:
            value = obj.attribute(attribute)
            if value not in environment.vocabulary.values(attribute):
                raise InputError(f"{name}: object {i}: unknown {attribute} {value!r}")
            facts.append(f"hasProperty({i}, {attribute}, {value}).")
    if relations and len(scene) > 1:
        matrices = scene.relation_matrices()
        for relation in RELATIONS:
            # matrices[rel][i, j]: j is rel of i, i.e. the fact rel(j, i).
            for i, j in np.argwhere(matrices[relation]).tolist():
                facts.append(f"{relation}({j}, {i}).")
    facts.append("hidden(X) :- object(X), not visible(X).")
    return "\n".join(facts)


@dataclass(frozen=True)
class ParsedQuestion:
    """A question's statements, its query rules guarded by the answer vocabulary.

    Each rule `query(T) :- Body.` becomes one rule `query(v) :- Body, V = T, V = v.`
    per answer value v, and `outside_vocabulary(K) :- Body, V = T, not answer_value(V).`
    (predicate names reserved). Grounding then creates query atoms for values of the
    vocabulary only, however many values T ranges over (clingo matches `V = v` without
    enumerating T), and a value outside it still shows.
    """

    statements: tuple[clingo_ast.AST, ...]
    answer_values: tuple[str, ...]
    vocabulary_name: str  # `color` when the query rules ask that one attribute, else `answer`
    query_lines: tuple[int, ...]  # the line of the K-th guarded query rule


_QUESTION_STATEMENTS = {
    clingo_ast.ASTType.Program, clingo_ast.ASTType.Comment, clingo_ast.ASTType.Rule,
    clingo_ast.ASTType.Definition, clingo_ast.ASTType.Defined,
}


def parse_question(text: str, name: str, environment: Environment) -> ParsedQuestion:
    """The question's statements; it must define query/1 or missing/1 with plain rules."""
    statements = parse_self_contained(text, name)
    kept: list[clingo_ast.AST] = []
    query_rules: list[clingo_ast.AST] = []
    for statement in statements:
        where = f"{name}: line {statement.location.begin.line}"
        if statement.ast_type not in _QUESTION_STATEMENTS:
            raise InputError(f"{where}: unsupported statement (a question holds rules only)")
        if statement.ast_type == clingo_ast.ASTType.Program and statement.name != "base":
            raise InputError(f"{where}: unsupported '#program {statement.name}' (only the base program is read)")
        if statement.ast_type != clingo_ast.ASTType.Rule:
            kept.append(statement)
            continue
        for rule in statement.unpool():
            for atom in atoms_below(rule):
                check_atom_arguments(atom, environment.vocabulary, where)
                if atom.name.startswith(RESERVED_PREFIX):
                    raise InputError(f"{where}: predicate names starting with '{RESERVED_PREFIX}' are reserved")
            if _query_head(rule) is not None:
                query_rules.append(rule)
            elif any(_is_query_atom(atom) for atom in atoms_below(rule.head)):
                raise InputError(f"{where}: query(Q) and missing(Q) may only be the head of a plain rule")
            else:
                kept.append(rule)
    if not query_rules:
        raise InputError(f"{name}: the question defines no query(Q) or missing(Q) rule")
    # The attribute a rule asks (`hasProperty(X, color, Q)`) binds every rule of the question.
    asked = set().union(*(_asked_attributes(rule) for rule in query_rules)) or set(ATTRIBUTES)
    values = sorted({v for attribute in asked for v in environment.vocabulary.values(attribute)})
    guarded = [g for label, rule in enumerate(query_rules) for g in _guarded(rule, label, values)]
    return ParsedQuestion(
        statements=(*kept, *guarded),
        answer_values=tuple(values),
        vocabulary_name=next(iter(asked)) if len(asked) == 1 else "answer",
        query_lines=tuple(rule.location.begin.line for rule in query_rules),
    )


def _is_query_atom(atom: clingo_ast.AST) -> bool:
    return atom.name in QUERY_PREDICATES and len(atom.arguments) == 1


def _query_head(rule: clingo_ast.AST) -> clingo_ast.AST | None:
    """The head atom of a plain rule `query(T) :- ...` or `missing(T) :- ...`, else None."""
    head = rule.head
    if (
        head.ast_type != clingo_ast.ASTType.Literal
        or head.sign != clingo_ast.Sign.NoSign
        or head.atom.ast_type != clingo_ast.ASTType.SymbolicAtom
        or head.atom.symbol.ast_type != clingo_ast.ASTType.Function
    ):
        return None
    return head.atom.symbol if _is_query_atom(head.atom.symbol) else None


def _asked_attributes(rule: clingo_ast.AST) -> set[str]:
    """Attributes A of positive body atoms `hasProperty(_, A, Q)` where Q is the head's variable."""
    term = _query_head(rule).arguments[0]
    if term.ast_type != clingo_ast.ASTType.Variable:
        return set()
    asked = set()
    for literal in rule.body:
        if literal.ast_type != clingo_ast.ASTType.Literal or literal.sign != clingo_ast.Sign.NoSign:
            continue
        for atom in atoms_below(literal):
            if atom.name != "hasProperty" or len(atom.arguments) != 3:
                continue
            attribute, value = atom.arguments[1], atom.arguments[2]
            if (
                value.ast_type == clingo_ast.ASTType.Variable and value.name == term.name
                and attribute.ast_type == clingo_ast.ASTType.SymbolicTerm
                and attribute.symbol.type == clingo.SymbolType.Function
                and attribute.symbol.name in ATTRIBUTES
            ):
                asked.add(attribute.symbol.name)
    return asked


def _variable_names(node: clingo_ast.AST) -> set[str]:
    return {sub.name for sub in walk(node) if sub.ast_type == clingo_ast.ASTType.Variable}


def _guarded(rule: clingo_ast.AST, label: int, values: Sequence[str]) -> list[clingo_ast.AST]:
    """One copy of the rule per answer value, and the rule flagging others as `outside_vocabulary(label)`."""
    location = rule.location
    head_atom = _query_head(rule)
    taken = _variable_names(rule)
    value_name = next(f"Value{'_' * n}" for n in range(len(taken) + 1) if f"Value{'_' * n}" not in taken)
    value = clingo_ast.Variable(location, value_name)

    def literal(atom: clingo_ast.AST, sign: int = clingo_ast.Sign.NoSign) -> clingo_ast.AST:
        return clingo_ast.Literal(location, sign, atom)

    def atom(predicate: str, argument: clingo_ast.AST) -> clingo_ast.AST:
        return clingo_ast.SymbolicAtom(clingo_ast.Function(location, predicate, [argument], 0))

    def equals(left: clingo_ast.AST, right: clingo_ast.AST) -> clingo_ast.AST:
        return literal(clingo_ast.Comparison(left, [clingo_ast.Guard(clingo_ast.ComparisonOperator.Equal, right)]))

    binds = equals(value, head_atom.arguments[0])
    guarded = []
    for text in values:
        constant = clingo_ast.SymbolicTerm(location, clingo.parse_term(text))
        guarded.append(rule.update(head=literal(atom(head_atom.name, constant)), body=[*rule.body, binds, equals(value, constant)]))
    guarded.append(
        clingo_ast.Rule(
            location,
            literal(atom(OUTSIDE_VOCABULARY, clingo_ast.SymbolicTerm(location, clingo.Number(label)))),
            [*rule.body, binds, literal(atom(ANSWER_VALUE, value), clingo_ast.Sign.Negation)],
        )
    )
    return guarded


_BRAVE_CACHE_SIZE = 50_000
_brave_cache: OrderedDict[tuple[str, ...], tuple[bool, tuple[str, ...] | str]] = OrderedDict()
_QUESTION_CACHE_SIZE = 4096
_question_cache: OrderedDict[tuple[str, ...], tuple[ParsedQuestion, bool]] = OrderedDict()


def _parsed_question(environment: Environment, question: str, question_name: str) -> tuple[ParsedQuestion, bool]:
    """The parsed question and whether the program reads spatial facts; cached, since walking clingo ASTs is slow."""
    key = (environment.name, environment.text, question, question_name)
    cached = _question_cache.get(key)
    if cached is None:
        parsed = parse_question(question, question_name, environment)
        spatial = environment.uses_spatial or any(
            atom.name in SPATIAL_PREDICATES
            for statement in parse_self_contained(question, question_name)
            for atom in atoms_below(statement)
        )
        cached = _question_cache[key] = (parsed, spatial)
        if len(_question_cache) > _QUESTION_CACHE_SIZE:
            _question_cache.popitem(last=False)
    return cached


def brave_answers(
    environment: Environment, scene: Scene, question: str, *, scene_name: str = "<scene>",
    question_name: str = "<question>",
) -> list[str]:
    """Sorted values Q with query(Q) (or missing(Q)) in some stable model.

    InputError when the question takes a value outside its answer vocabulary in
    some stable model, rather than a list of such values.

    Results are remembered by the exact program text: the game asks the same
    visible regions again and again while only coordinates change. The spatial
    facts (left/2 ...) join the program only when the environment or the
    question reads them; otherwise they cannot change a stable model.
    """
    parsed, spatial = _parsed_question(environment, question, question_name)
    facts_text = partial_scene_facts(scene, environment, scene_name, relations=spatial)
    key = (environment.name, environment.text, facts_text, question, scene_name, question_name)
    cached = _brave_cache.get(key)
    if cached is None:
        try:
            cached = (True, tuple(_solve_brave(environment, parsed, facts_text, scene_name, question_name)))
        except InputError as exc:
            cached = (False, str(exc))
        _brave_cache[key] = cached
        if len(_brave_cache) > _BRAVE_CACHE_SIZE:
            _brave_cache.popitem(last=False)
    else:
        _brave_cache.move_to_end(key)
    ok, result = cached
    if not ok:
        raise InputError(result)
    return list(result)


def _solve_brave(
    environment: Environment, parsed: ParsedQuestion, facts_text: str, scene_name: str, question_name: str
) -> list[str]:
    facts = parse_program(facts_text, scene_name)
    values = " ".join(f"{ANSWER_VALUE}({v})." for v in parsed.answer_values)
    shown = " ".join(f"#show {p}/1." for p in (*QUERY_PREDICATES, OUTSIDE_VOCABULARY))
    extra = parse_program(f"{values} {shown}", "question guard")
    control = environment.grounded_control((*facts, *parsed.statements, *extra), ["--enum-mode=brave", "--models=0"])
    last: list[clingo.Symbol] = []
    found = False

    def on_model(model: clingo.Model) -> None:
        nonlocal last, found
        found = True
        last = model.symbols(shown=True)

    control.solve(on_model=on_model)
    if not found:
        raise InputError(f"{scene_name}: no completion of the visible scene satisfies {environment.name}")
    expected = f"the {parsed.vocabulary_name} vocabulary (expected one of {', '.join(parsed.answer_values)})"
    outside = sorted(s.arguments[0].number for s in last if s.name == OUTSIDE_VOCABULARY and len(s.arguments) == 1)
    if outside:
        raise InputError(f"{question_name}: line {parsed.query_lines[outside[0]]}: the query takes values outside {expected}")
    answers = sorted({str(s.arguments[0]) for s in last if s.name in QUERY_PREDICATES and len(s.arguments) == 1})
    # Guarded rules make no such atom; an environment's `#show` term can still show one.
    stray = [a for a in answers if a not in parsed.answer_values]
    if stray:
        raise InputError(f"{environment.name}: a #show statement adds the answer {stray[0]!r}, outside {expected}")
    return answers
