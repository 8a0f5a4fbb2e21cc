"""The background program the project adds to every environment.

It holds the CLEVR-POC domains, one value per attribute and one region per
object (choice rules), the derived predicates an environment may use, and the
two world rules (no identical twins, at most 3 objects per region). The comment
line right above each integrity constraint is its English sentence: the checker
reports it when the constraint fails.

Spatial relations between objects (`left/2`, `right/2`, `front/2`, `behind/2`;
`right(A, B)` reads "A is right of B") are inputs: facts from coordinates, never
guessed. The region relations `right_R(A, B)` etc. say that A *can* be right of B
given the regions of A and B.
"""

from __future__ import annotations

from clevr_game.asp.regions import FRONT_HALF, NUM_REGIONS, RIGHT_HALF
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC, Vocabulary

MAX_PER_REGION = 3

# The background's integrity constraints, in text order (the compiled checker mirrors them).
BACKGROUND_CONSTRAINTS: tuple[str, ...] = ("distinct_objects", "region_capacity")

SPATIAL_PREDICATES: tuple[str, ...] = ("left", "right", "front", "behind")

# name -> arity of every predicate the model defines; an environment may use these
# in rule bodies but may define only `object/1` (and helper predicates of its own).
MODEL_PREDICATES: dict[str, int] = {
    "object": 1, "value": 2, "attribute": 1, "region": 1,
    "at": 2, "hasProperty": 3, "sameProperty": 3,
    "same_size": 2, "same_color": 2, "same_material": 2, "same_shape": 2,
    "left": 2, "right": 2, "front": 2, "behind": 2,
    "right_R": 2, "left_R": 2, "front_R": 2, "behind_R": 2,
    "left_half": 1, "right_half": 1, "front_half": 1, "back_half": 1,
    "hidden": 1, "visible": 1,
}


def _domain_facts(vocabulary: Vocabulary) -> str:
    lines = []
    for attribute in ATTRIBUTES:
        lines.append(" ".join(f"value({attribute}, {v})." for v in vocabulary.values(attribute)))
    lines.append(f"region(0..{NUM_REGIONS - 1}).")
    halves = [
        " ".join(f"right_half({r})." for r in sorted(RIGHT_HALF)),
        " ".join(f"left_half({r})." for r in range(NUM_REGIONS) if r not in RIGHT_HALF),
        " ".join(f"front_half({r})." for r in sorted(FRONT_HALF)),
        " ".join(f"back_half({r})." for r in range(NUM_REGIONS) if r not in FRONT_HALF),
    ]
    return "\n".join(lines + halves)


_RULES = f"""
attribute(A) :- value(A, _).
#defined left/2. #defined right/2. #defined front/2. #defined behind/2.
#defined hidden/1. #defined visible/1.

1 {{ hasProperty(X, A, V) : value(A, V) }} 1 :- object(X), attribute(A).
1 {{ at(X, R) : region(R) }} 1 :- object(X).

sameProperty(X, Y, A) :- hasProperty(X, A, V), hasProperty(Y, A, V), X != Y.
same_size(X, Y) :- sameProperty(X, Y, size).
same_color(X, Y) :- sameProperty(X, Y, color).
same_material(X, Y) :- sameProperty(X, Y, material).
same_shape(X, Y) :- sameProperty(X, Y, shape).

right_R(X, Y) :- object(X), at(Y, RY), left_half(RY), X != Y.
right_R(X, Y) :- at(X, RX), right_half(RX), at(Y, RY), right_half(RY), X != Y.
front_R(X, Y) :- object(X), at(Y, RY), back_half(RY), X != Y.
front_R(X, Y) :- at(X, RX), front_half(RX), at(Y, RY), front_half(RY), X != Y.
left_R(X, Y) :- right_R(Y, X).
behind_R(X, Y) :- front_R(Y, X).

% No two objects are identical in all four attributes.
:- object(X), object(Y), X < Y, sameProperty(X, Y, size), sameProperty(X, Y, color), sameProperty(X, Y, material), sameProperty(X, Y, shape).
% No region holds more than {MAX_PER_REGION} objects.
:- region(R), #count {{ X : at(X, R) }} > {MAX_PER_REGION}.
"""


def background_program(vocabulary: Vocabulary = CLEVR_POC) -> str:
    """The background ASP text for `vocabulary` (CLEVR-POC by default)."""
    return _domain_facts(vocabulary) + "\n" + _RULES


BACKGROUND = background_program()
