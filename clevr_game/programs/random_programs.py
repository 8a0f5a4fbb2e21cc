"""Seeded random well-typed programs over the whole catalogue, for tests and benchmarks.

Given a scene's objects, side inputs are mostly drawn from them and `unique`
usually filters by attributes of one real object, so that a fair share of the
programs get past their `unique` nodes the way CLEVR's questions do; a small
share of values are empty or unknown, to exercise those paths too.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from clevr_game.programs.program import Node, Program
from clevr_game.programs.signatures import ATTRIBUTE_TYPES, BOOL, INTEGER, OBJECT, OBJECT_SET
from clevr_game.vocab import ATTRIBUTES, CLEVR, RELATIONS, Vocabulary

ANSWER_TYPES: tuple[str, ...] = (BOOL, INTEGER, OBJECT, OBJECT_SET, *ATTRIBUTE_TYPES.values())
_ATTRIBUTE_OF_TYPE = {kind: attribute for attribute, kind in ATTRIBUTE_TYPES.items()}
UNKNOWN_VALUE = "no-such-value"


class _Builder:
    def __init__(
        self,
        rng: random.Random,
        vocabulary: Vocabulary,
        objects: Sequence[Mapping[str, str]],
        composites: bool,
        odd_values: float,
    ) -> None:
        self.rng = rng
        self.vocabulary = vocabulary
        self.objects = objects
        self.composites = composites
        self.odd_values = odd_values
        self.nodes: list[Node] = []

    def add(self, function: str, inputs: Sequence[int] = (), values: Sequence[str] = ()) -> int:
        self.nodes.append(Node(function, tuple(inputs), tuple(values)))
        return len(self.nodes) - 1

    def composite(self) -> bool:
        return self.composites and self.rng.random() < 0.4

    def value(self, attribute: str, target: Mapping[str, str] | None = None) -> str:
        rng = self.rng
        if rng.random() < self.odd_values:
            return rng.choice(("", UNKNOWN_VALUE))
        if target is not None:
            return target[attribute]
        if self.objects and rng.random() < 0.8:
            return rng.choice(self.objects)[attribute]
        return rng.choice(self.vocabulary.values(attribute))

    def side_inputs(self, target: Mapping[str, str] | None = None, keep: float = 0.4) -> list[str]:
        # "" means any attribute value in a template side input.
        return [self.value(a, target) if self.rng.random() < keep else "" for a in ATTRIBUTES]

    def relation(self) -> str:
        return self.rng.choice(RELATIONS)

    # -------------------------------------------------------------- by type

    def object_set(self, depth: int) -> int:
        rng = self.rng
        choice = rng.randrange(8) if depth > 0 else rng.randrange(3)
        if choice == 0:
            return self.add("scene")
        if choice == 1:
            attribute = rng.choice(ATTRIBUTES)
            return self.add(f"filter_{attribute}", [self.object_set(depth - 1)], [self.value(attribute)])
        if choice == 2:
            if self.composites:
                return self.add("filter", [self.object_set(depth - 1)], self.side_inputs())
            return self.add("filter_shape", [self.object_set(depth - 1)], [self.value("shape")])
        if choice in (3, 4):
            if self.composite():
                return self.add("relate_filter", [self.object(depth - 1)], [self.relation(), *self.side_inputs()])
            return self.add("relate", [self.object(depth - 1)], [self.relation()])
        if choice == 5:
            return self.add(f"same_{rng.choice(ATTRIBUTES)}", [self.object(depth - 1)])
        left = self.object_set(depth - 1)
        return self.add(rng.choice(("union", "intersect")), [left, self.object_set(depth - 1)])

    def object(self, depth: int) -> int:
        rng = self.rng
        target = rng.choice(self.objects) if self.objects else None
        if depth > 0 and rng.random() < 0.3:
            if self.composite():
                return self.add(
                    "relate_filter_unique", [self.object(depth - 1)], [self.relation(), *self.side_inputs(target, 0.7)]
                )
            return self.add("unique", [self.object_set(depth - 1)])
        if self.composite():
            return self.add("filter_unique", [self.add("scene")], self.side_inputs(target, 0.7))
        # Filter the scene by some attributes of one object, as CLEVR's questions do.
        current = self.add("scene")
        for attribute in ATTRIBUTES:
            if rng.random() < 0.6:
                current = self.add(f"filter_{attribute}", [current], [self.value(attribute, target)])
        return self.add("unique", [current])

    def integer(self, depth: int) -> int:
        if self.composite():
            if self.rng.random() < 0.5:
                return self.add("filter_count", [self.object_set(depth - 1)], self.side_inputs())
            return self.add(
                "relate_filter_count", [self.object(depth - 1)], [self.relation(), *self.side_inputs()]
            )
        return self.add("count", [self.object_set(depth - 1)])

    def boolean(self, depth: int) -> int:
        rng = self.rng
        choice = rng.randrange(5)
        if choice == 0 and self.composite():
            if rng.random() < 0.5:
                return self.add("filter_exist", [self.object_set(depth - 1)], self.side_inputs())
            return self.add(
                "relate_filter_exist", [self.object(depth - 1)], [self.relation(), *self.side_inputs()]
            )
        if choice <= 1:
            return self.add("exist", [self.object_set(depth - 1)])
        if choice == 2:
            left = self.integer(depth - 1)
            return self.add(rng.choice(("equal_integer", "less_than", "greater_than")), [left, self.integer(depth - 1)])
        if choice == 3:
            attribute = rng.choice(ATTRIBUTES)
            left = self.query(attribute, depth - 1)
            return self.add(f"equal_{attribute}", [left, self.query(attribute, depth - 1)])
        left = self.object(depth - 1)
        return self.add("equal_object", [left, self.object(depth - 1)])

    def query(self, attribute: str, depth: int) -> int:
        return self.add(f"query_{attribute}", [self.object(depth)])

    def build(self, answer_type: str, depth: int) -> Program:
        if answer_type == OBJECT_SET:
            self.object_set(depth)
        elif answer_type == OBJECT:
            self.object(depth)
        elif answer_type == INTEGER:
            self.integer(depth)
        elif answer_type == BOOL:
            self.boolean(depth)
        else:
            self.query(_ATTRIBUTE_OF_TYPE[answer_type], depth)
        return tuple(self.nodes)


def random_program(
    rng: random.Random,
    *,
    objects: Sequence[Mapping[str, str]] = (),
    vocabulary: Vocabulary = CLEVR,
    answer_type: str | None = None,
    depth: int = 3,
    composites: bool = True,
    odd_values: float = 0.03,
) -> Program:
    """A random well-typed program; `objects` (attribute dicts) bias values towards a scene.

    `answer_type` is one of ANSWER_TYPES (random when None, rarely ObjectSet, which
    always answers INVALID); `composites=False` keeps to CLEVR's primitive functions.
    """
    if answer_type is None:
        answer_type = rng.choices(ANSWER_TYPES, weights=(4, 3, 1, 1, 1, 1, 1, 1))[0]
    builder = _Builder(rng, vocabulary, objects, composites, odd_values)
    return builder.build(answer_type, depth)
