"""Hidden-object questions answered by brave reasoning: every value the query takes in some stable model.

The program is the background, the environment, the partial scene as facts
(`visible/1`, `hasProperty/3`, `at/2` and the spatial relations between visible
objects) and the question's rule, whose head is `query(Q)` or `missing(Q)`.
Objects of the environment that the partial scene does not show are
`hidden/1`: their attributes and regions stay open.
"""

from __future__ import annotations

import clingo
import clingo.ast as clingo_ast
import numpy as np

from clevr_game.asp.clingo_io import parse_program
from clevr_game.asp.environment import Environment
from clevr_game.asp.parsing import atoms_below, check_atom_arguments
from clevr_game.asp.regions import NUM_REGIONS, regions_of
from clevr_game.errors import InputError
from clevr_game.scene import Scene
from clevr_game.vocab import ATTRIBUTES, RELATIONS

QUERY_PREDICATES: tuple[str, ...] = ("query", "missing")


def scene_regions(scene: Scene, name: str) -> list[int]:
    """Each object's `region` field, or the region of its coordinates when the field is absent."""
    from_coords = regions_of(scene.coords(), scene.directions).tolist() if len(scene) else []
    regions = []
    for i, obj in enumerate(scene.objects):
        region = obj.extra.get("region", from_coords[i])
        if isinstance(region, bool) or not isinstance(region, int) or not 0 <= region < NUM_REGIONS:
            raise InputError(f"{name}: object {i}: region must be an integer 0..{NUM_REGIONS - 1}, got {region!r}")
        regions.append(region)
    return regions


def partial_scene_facts(scene: Scene, environment: Environment, name: str = "<scene>") -> str:
    """ASP facts for the visible objects 0..K-1 of a partial scene."""
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
    if len(scene) > 1:
        matrices = scene.relation_matrices()
        for relation in RELATIONS:
            # matrices[rel][i, j]: j is rel of i, i.e. the fact rel(j, i).
            for i, j in np.argwhere(matrices[relation]).tolist():
                facts.append(f"{relation}({j}, {i}).")
    facts.append("hidden(X) :- object(X), not visible(X).")
    return "\n".join(facts)


def parse_question(text: str, name: str, environment: Environment) -> list[clingo_ast.AST]:
    """The question's statements; it must define query/1 or missing/1."""
    statements = parse_program(text, name)
    defines_query = False
    for statement in statements:
        if statement.ast_type != clingo_ast.ASTType.Rule:
            continue
        where = f"{name}: line {statement.location.begin.line}"
        for atom in atoms_below(statement):
            check_atom_arguments(atom, environment.vocabulary, where)
        head = statement.head
        if head.ast_type == clingo_ast.ASTType.Literal and head.atom.ast_type == clingo_ast.ASTType.SymbolicAtom:
            symbol = head.atom.symbol
            defines_query |= symbol.name in QUERY_PREDICATES and len(symbol.arguments) == 1
    if not defines_query:
        raise InputError(f"{name}: the question defines no query(Q) or missing(Q) rule")
    return statements


def brave_answers(
    environment: Environment, scene: Scene, question: str, *, scene_name: str = "<scene>",
    question_name: str = "<question>",
) -> list[str]:
    """Sorted values Q with query(Q) (or missing(Q)) in some stable model."""
    statements = parse_question(question, question_name, environment)
    facts = parse_program(partial_scene_facts(scene, environment, scene_name), scene_name)
    show = parse_program(" ".join(f"#show {p}/1." for p in QUERY_PREDICATES), "show")
    control = environment.grounded_control((*facts, *statements, *show), ["--enum-mode=brave", "--models=0"])
    last: list[clingo.Symbol] = []
    found = False

    def on_model(model: clingo.Model) -> None:
        nonlocal last, found
        found = True
        last = model.symbols(shown=True)

    control.solve(on_model=on_model)
    if not found:
        raise InputError(f"{scene_name}: no completion of the visible scene satisfies {environment.name}")
    return sorted({str(symbol.arguments[0]) for symbol in last})
