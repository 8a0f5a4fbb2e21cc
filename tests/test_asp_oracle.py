"""An independent clingo oracle for the CLEVR-POC tests, written apart from clevr_game.asp.

It encodes the world its own way (arithmetic on region numbers, explicit
twin test) and builds a fresh program per question, so agreeing with it is
evidence, not a tautology. Other test modules import it; its own tests pin it
to hand-checked cases.
"""

from __future__ import annotations

import clingo

from clevr_game.vocab import ATTRIBUTES, CLEVR_POC

DOMAINS = "\n".join(
    f"dom({a}, ({';'.join(CLEVR_POC.values(a))}))." for a in ATTRIBUTES
) + "\nattr(P) :- dom(P, _).\nreg(0..3).\n"

# Regions: odd numbers are the right half, 2 and 3 the front half.
DERIVED = """
sameProperty(A, B, P) :- hasProperty(A, P, V), hasProperty(B, P, V), A != B.
same_size(A, B) :- sameProperty(A, B, size).
same_color(A, B) :- sameProperty(A, B, color).
same_material(A, B) :- sameProperty(A, B, material).
same_shape(A, B) :- sameProperty(A, B, shape).
right_R(A, B) :- object(A), at(B, RB), RB \\ 2 == 0, A != B.
right_R(A, B) :- at(A, RA), at(B, RB), RA \\ 2 == 1, RB \\ 2 == 1, A != B.
front_R(A, B) :- object(A), at(B, RB), RB < 2, A != B.
front_R(A, B) :- at(A, RA), at(B, RB), RA >= 2, RB >= 2, A != B.
left_R(A, B) :- right_R(B, A).
behind_R(A, B) :- front_R(B, A).
#defined left/2. #defined right/2. #defined front/2. #defined behind/2.
"""

WORLD_RULES = [
    ":- object(A), object(B), A < B, hasProperty(A, size, S), hasProperty(B, size, S), "
    "hasProperty(A, color, C), hasProperty(B, color, C), hasProperty(A, material, M), "
    "hasProperty(B, material, M), hasProperty(A, shape, H), hasProperty(B, shape, H).",
    ":- reg(R), 4 <= #count { A : at(A, R) }.",
]


def scene_facts(rows: list[tuple[str, str, str, str, int]]) -> str:
    """Facts for (size, color, material, shape, region) rows, objects numbered in order."""
    out = []
    for i, (size, color, material, shape, region) in enumerate(rows):
        out.append(
            f"hasProperty({i}, size, {size}). hasProperty({i}, color, {color}). "
            f"hasProperty({i}, material, {material}). hasProperty({i}, shape, {shape}). at({i}, {region})."
        )
    return "\n".join(out)


def labelled(constraints: list[str], first: int) -> str:
    """Each `:- body.` line becomes `bad(K) :- body.`."""
    out = []
    for k, line in enumerate(constraints):
        assert line.startswith(":-"), line
        out.append(f"bad({first + k}) {line}")
    return "\n".join(out)


def env_constraint_lines(environment_text: str) -> list[str]:
    return [line.strip() for line in environment_text.splitlines() if line.strip().startswith(":-")]


def env_object_line(environment_text: str) -> str:
    return next(line for line in environment_text.splitlines() if line.startswith("object("))


def oracle_violations(environment_text: str, rows: list[tuple[str, str, str, str, int]]) -> list[int]:
    """Labels of failing constraints (0, 1: world rules; 2..: the environment's, in file order)."""
    program = "\n".join([
        DOMAINS, DERIVED, env_object_line(environment_text), scene_facts(rows),
        labelled(WORLD_RULES, 0), labelled(env_constraint_lines(environment_text), len(WORLD_RULES)),
        "#show bad/1.",
    ])
    control = clingo.Control(["--models=1"], logger=lambda code, message: None)
    control.add("base", [], program)
    control.ground([("base", [])])
    found: list[list[int]] = []
    control.solve(on_model=lambda m: found.append(sorted(s.arguments[0].number for s in m.symbols(shown=True))))
    assert len(found) == 1
    return found[0]


def oracle_satisfied(environment_text: str, rows: list[tuple[str, str, str, str, int]]) -> bool:
    """Plain hard-constraint program: satisfiable iff the scene meets the environment."""
    program = "\n".join([DOMAINS, DERIVED, *WORLD_RULES, environment_text, scene_facts(rows)])
    control = clingo.Control(logger=lambda code, message: None)
    control.add("base", [], program)
    control.ground([("base", [])])
    return bool(control.solve().satisfiable)


def oracle_answers(
    environment_text: str, visible: list[tuple[str, str, str, str, int]], question_rule: str
) -> list[str]:
    """Every value of query/1 over all answer sets (plain enumeration, no brave mode)."""
    hidden_guess = """
    visible(0..K-1) :- visible_count(K), K > 0.
    hidden(X) :- object(X), not visible(X).
    1 { hasProperty(X, P, V) : dom(P, V) } 1 :- hidden(X), attr(P).
    1 { at(X, R) : reg(R) } 1 :- hidden(X).
    """
    program = "\n".join([
        DOMAINS, DERIVED, *WORLD_RULES, environment_text, scene_facts(visible),
        f"visible_count({len(visible)}).", hidden_guess, question_rule, "#show query/1. #show missing/1.",
    ])
    control = clingo.Control(["--models=0"], logger=lambda code, message: None)
    control.add("base", [], program)
    control.ground([("base", [])])
    values: set[str] = set()
    control.solve(on_model=lambda m: values.update(str(s.arguments[0]) for s in m.symbols(shown=True)))
    return sorted(values)


# ---------------------------------------------------------------- the oracle's own tests

ENV = """object(0..2).
:- object(X), at(X, 1), not hasProperty(X, shape, cube).
"""


def test_oracle_flags_a_hand_checked_violation() -> None:
    good = [("small", "red", "rubber", "cube", 1), ("large", "red", "rubber", "cube", 1), ("small", "blue", "metal", "cone", 0)]
    bad = [("small", "red", "rubber", "sphere", 1), *good[1:]]
    twins = [good[0], good[0], good[2]]
    assert oracle_violations(ENV, good) == [] and oracle_satisfied(ENV, good)
    assert oracle_violations(ENV, bad) == [2] and not oracle_satisfied(ENV, bad)
    assert oracle_violations(ENV, twins) == [0]


def test_oracle_answers_enumerate_the_hidden_object() -> None:
    visible = [("small", "red", "rubber", "cube", 1), ("large", "blue", "metal", "cone", 0)]
    # Hidden object 2 is right of the region-1 cube, so it is in region 1 or 3; in region 1 it is a cube.
    rule = "query(Q) :- hidden(X), hasProperty(X, shape, Q), right_R(X, 0), at(X, 1)."
    assert oracle_answers(ENV, visible, rule) == ["cube"]
    rule = "query(Q) :- hidden(X), hasProperty(X, shape, Q), right_R(X, 0)."
    assert oracle_answers(ENV, visible, rule) == ["cone", "cube", "cylinder", "sphere"]
