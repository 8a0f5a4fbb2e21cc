"""Hidden-object questions: text, CLEVR functional program and ASP rule for one hidden object.

The question names the hidden object through visible ones ("What color is the
missing cube that is left of the small red sphere and has the same material as
the large cylinder?"). Each visible referent gets the shortest description that
is unique among the visible objects. The functional program, run on the
complete scene, picks out exactly the hidden object (questions for which it
does not are not made); the ASP rule's head is `query(Q)`, its body the same
conditions with the spatial ones relaxed to regions (`left_R` ...), since the
hidden object's coordinates are unknown.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from clevr_game.errors import InputError
from clevr_game.programs import INVALID_ANSWER, Node, Program, reference_execute
from clevr_game.scene import Scene, SceneObject
from clevr_game.vocab import ATTRIBUTES, RELATIONS

RELATION_PHRASES = {"left": "left of", "right": "right of", "front": "in front of", "behind": "behind"}
KNOWN_ATTRIBUTE_PROBABILITY = 0.5


@dataclass(frozen=True)
class Condition:
    """The hidden object is `relation` of visible object `target`, or shares `attribute` with it."""

    kind: str  # "relate" | "same"
    target: int  # index in the complete scene
    relation: str | None = None
    attribute: str | None = None


@dataclass(frozen=True)
class HiddenQuestion:
    text: str
    program: Program
    rule: str
    query_attribute: str


def noun_phrase(filters: list[tuple[str, str]]) -> str:
    """[(size, small), (color, red), (shape, sphere)] -> `small red sphere`; no shape -> `... object`."""
    words = [value for attribute, value in filters if attribute != "shape"]
    shape = [value for attribute, value in filters if attribute == "shape"]
    return " ".join(words + (shape or ["object"]))


def unique_description(objects: list[SceneObject], index: int, rng: np.random.Generator) -> list[tuple[str, str]] | None:
    """The fewest attribute filters (CLEVR order) that single out objects[index]; ties broken at random."""
    target = objects[index]
    for size in range(1, len(ATTRIBUTES) + 1):
        subsets = list(itertools.combinations(ATTRIBUTES, size))
        for k in rng.permutation(len(subsets)).tolist():
            chosen = subsets[k]
            matches = [o for o in objects if all(o.attribute(a) == target.attribute(a) for a in chosen)]
            if len(matches) == 1:
                return [(a, target.attribute(a)) for a in chosen]
    return None


def candidate_conditions(scene: Scene, hidden: int, query_attribute: str) -> list[Condition]:
    """Every true statement linking the hidden object to one visible object."""
    matrices = scene.relation_matrices()
    hidden_object = scene.objects[hidden]
    out = []
    for target, obj in enumerate(scene.objects):
        if target == hidden:
            continue
        # matrices[rel][target, hidden]: the hidden object is `rel` of the target.
        out.extend(Condition("relate", target, relation=r) for r in RELATIONS if matrices[r][target, hidden])
        out.extend(
            Condition("same", target, attribute=a)
            for a in ATTRIBUTES
            if a != query_attribute and obj.attribute(a) == hidden_object.attribute(a)
        )
    return out


class _ProgramBuilder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def add(self, function: str, inputs: tuple[int, ...] = (), values: tuple[str, ...] = ()) -> int:
        self.nodes.append(Node(function, inputs, values))
        return len(self.nodes) - 1


def build_program(
    conditions: list[Condition],
    descriptions: dict[int, list[tuple[str, str]]],
    known: tuple[str, str] | None,
    query_attribute: str,
) -> Program:
    builder = _ProgramBuilder()
    sets = []
    for condition in conditions:
        current = builder.add("scene")
        for attribute, value in descriptions[condition.target]:
            current = builder.add(f"filter_{attribute}", (current,), (value,))
        unique = builder.add("unique", (current,))
        if condition.kind == "relate":
            sets.append(builder.add("relate", (unique,), (str(condition.relation),)))
        else:
            sets.append(builder.add(f"same_{condition.attribute}", (unique,)))
    combined = sets[0]
    for other in sets[1:]:
        combined = builder.add("intersect", (combined, other))
    if known is not None:
        combined = builder.add(f"filter_{known[0]}", (combined,), (known[1],))
    unique = builder.add("unique", (combined,))
    builder.add(f"query_{query_attribute}", (unique,))
    return tuple(builder.nodes)


def question_text(
    conditions: list[Condition],
    descriptions: dict[int, list[tuple[str, str]]],
    known: tuple[str, str] | None,
    query_attribute: str,
) -> str:
    clauses = []
    for condition in conditions:
        referent = f"the {noun_phrase(descriptions[condition.target])}"
        if condition.kind == "relate":
            clauses.append(f"is {RELATION_PHRASES[str(condition.relation)]} {referent}")
        else:
            clauses.append(f"has the same {condition.attribute} as {referent}")
    hidden = noun_phrase([known]) if known is not None else "object"
    return f"What {query_attribute} is the missing {hidden} that {' and '.join(clauses)}?"


def asp_rule(
    conditions: list[Condition], partial_index: dict[int, int], known: tuple[str, str] | None, query_attribute: str
) -> str:
    body = ["hidden(X)", f"hasProperty(X, {query_attribute}, Q)"]
    if known is not None:
        body.append(f"hasProperty(X, {known[0]}, {known[1]})")
    for condition in conditions:
        target = partial_index[condition.target]
        if condition.kind == "relate":
            body.append(f"{condition.relation}_R(X, {target})")
        else:
            body.append(f"same_{condition.attribute}(X, {target})")
    return f"query(Q) :- {', '.join(body)}."


def partial_scene(scene: Scene, hidden: int) -> Scene:
    """The scene without object `hidden`, relationships recomputed."""
    objects = [o for i, o in enumerate(scene.objects) if i != hidden]
    partial = Scene(
        objects=objects, directions=dict(scene.directions), vocabulary=scene.vocabulary,
        image_index=scene.image_index, image_filename=scene.image_filename, split=scene.split,
        extra=dict(scene.extra),
    )
    partial.relationships = partial.computed_relationships()
    return partial


def make_question(
    scene: Scene, hidden: int, query_attribute: str, rng: np.random.Generator, tries: int = 20
) -> HiddenQuestion | None:
    """A question about `query_attribute` of object `hidden` of the complete `scene`, or None."""
    candidates = candidate_conditions(scene, hidden, query_attribute)
    visible = [o for i, o in enumerate(scene.objects) if i != hidden]
    partial_index = {i: k for k, i in enumerate(i for i in range(len(scene)) if i != hidden)}
    descriptions = {}
    for i in {c.target for c in candidates}:
        description = unique_description(visible, partial_index[i], rng)
        if description is not None:
            descriptions[i] = description
    candidates = [c for c in candidates if c.target in descriptions]
    if not candidates:
        return None
    scene_json = scene.to_json()
    hidden_object = scene.objects[hidden]
    true_value = hidden_object.attribute(query_attribute)
    others = [a for a in ATTRIBUTES if a != query_attribute]
    for _ in range(tries):
        count = min(len(candidates), int(rng.integers(1, 3)))
        picked = [candidates[k] for k in sorted(rng.choice(len(candidates), count, replace=False).tolist())]
        known = None
        if rng.random() < KNOWN_ATTRIBUTE_PROBABILITY:
            attribute = others[int(rng.integers(len(others)))]
            known = (attribute, hidden_object.attribute(attribute))
        program = build_program(picked, descriptions, known, query_attribute)
        answer = reference_execute(program, scene_json)
        if answer == INVALID_ANSWER or answer != true_value:
            continue
        return HiddenQuestion(
            text=question_text(picked, descriptions, known, query_attribute),
            program=program,
            rule=asp_rule(picked, partial_index, known, query_attribute),
            query_attribute=query_attribute,
        )
    return None


def _visible_referents(program: Program, index: int, visible: Scene) -> list[int]:
    """Visible objects picked out by node `index`: `scene` narrowed by filters (a referent's description)."""
    node = program[index]
    if node.function == "scene":
        return list(range(len(visible)))
    if node.function.startswith("filter_") and node.function[len("filter_"):] in ATTRIBUTES:
        attribute, value = node.function[len("filter_"):], node.value_inputs[0]
        return [i for i in _visible_referents(program, node.inputs[0], visible)
                if visible.objects[i].attribute(attribute) == value]
    raise InputError(f"program node {index}: {node.function} cannot describe a visible object")


def _referent(program: Program, index: int, visible: Scene) -> int:
    node = program[index]
    if node.function != "unique":
        raise InputError(f"program node {index}: expected unique(...) naming one visible object, got {node.function}")
    found = _visible_referents(program, node.inputs[0], visible)
    if len(found) != 1:
        raise InputError(f"program node {index}: the description matches {len(found)} visible objects, not one")
    return found[0]


def _hidden_conditions(
    program: Program, index: int, visible: Scene, known: list[str], links: list[str]
) -> None:
    """Body literals about X (the hidden object) of the set expression at node `index`."""
    node = program[index]
    function = node.function
    if function == "scene":
        return
    if function == "intersect":
        for child in node.inputs:
            _hidden_conditions(program, child, visible, known, links)
        return
    if function.startswith("filter_") and function[len("filter_"):] in ATTRIBUTES:
        _hidden_conditions(program, node.inputs[0], visible, known, links)
        known.append(f"hasProperty(X, {function[len('filter_'):]}, {node.value_inputs[0]})")
        return
    if function == "relate" and node.value_inputs and node.value_inputs[0] in RELATIONS:
        links.append(f"{node.value_inputs[0]}_R(X, {_referent(program, node.inputs[0], visible)})")
        return
    if function.startswith("same_") and function[len("same_"):] in ATTRIBUTES:
        links.append(f"{function}(X, {_referent(program, node.inputs[0], visible)})")
        return
    raise InputError(f"program node {index}: {function} is not part of a hidden-object question")


def program_rule(program: Program, visible: Scene) -> str:
    """The ASP query rule of a hidden-object program, its referents resolved on the visible scene.

    The inverse of `make_question` for its programs: `query_A(unique(S))`, where S
    intersects relate / same_A of visible referents (each `unique` of `scene`
    narrowed by filters, which must match exactly one visible object) and may be
    filtered by a known attribute of the hidden object. Visible objects are numbered
    by their position in `visible`, as in the items' `asp` field. InputError (one
    line naming the node) for any other program.
    """
    if not program:
        raise InputError("empty program")
    last = len(program) - 1
    root = program[last]
    attribute = root.function[len("query_"):] if root.function.startswith("query_") else ""
    if attribute not in ATTRIBUTES:
        raise InputError(f"program node {last}: expected query_<attribute> at the end, got {root.function}")
    unique = program[root.inputs[0]]
    if unique.function != "unique":
        raise InputError(f"program node {root.inputs[0]}: expected unique(...) of the hidden object, got {unique.function}")
    known: list[str] = []
    links: list[str] = []
    _hidden_conditions(program, unique.inputs[0], visible, known, links)
    if not links:
        raise InputError("the program relates the hidden object to no visible object")
    body = ["hidden(X)", f"hasProperty(X, {attribute}, Q)", *known, *links]
    return f"query(Q) :- {', '.join(body)}."
