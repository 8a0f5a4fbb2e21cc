"""Instantiate one template on one scene, `minimal` sampling: a randomised depth-first search over its params.

(`clevr` sampling, CLEVR's own generator's distribution, is clevr_search.py; the plan is shared.)
Only valid choices are ever enumerated: a filter node offers exactly the keys
whose every value is needed (and, for `unique`, that match one object), so the
search rarely backtracks. At the last node with params every remaining node is
fixed, so the answer of each option is known before choosing; the answer is
then drawn among those the balancer still accepts, and an option with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clevr_game.questions.evaluate import (
    INVALID,
    apply_fixed,
    finish_selection,
    format_answer,
    is_degenerate,
    tail_of,
)
from clevr_game.questions.facts import GenerationFacts
from clevr_game.questions.templates import COMPOSITES, SET, Template, output_type
from clevr_game.vocab import RELATIONS


@dataclass(frozen=True)
class Step:
    """One template node, prepared for the search."""

    function: str
    inputs: tuple[int, ...]
    kind: str
    """`fixed`, `filter`, `relate_filter`, `relate` (raw) or `filter_value` (a template filter_<attr>)."""
    names: tuple[str, ...]
    """Attribute param names (size, color, material, shape) of a composite; the one param otherwise."""
    relation_name: str | None
    tail: str
    allowed: int
    """Bitset of attribute positions a composite may set (NULL constraints clear bits)."""
    out_neq: tuple[int, ...]
    """Earlier nodes whose selection must differ from this node's."""
    neq: tuple[tuple[str, str], ...]
    """Param pairs that must differ, checked once this node has set the later of them."""
    base: int
    """The node whose output CLEVR's generator matches a filter's options against: the node
    before when it gives a set (CLEVR reads the last node's output), else the input."""


@dataclass(frozen=True)
class Plan:
    template: Template
    steps: tuple[Step, ...]
    last_choice: int
    """Index of the last step with params (-1 if none): every step after it is fixed."""
    has_raw_relate: bool


def assign_values(step: Step, facts: GenerationFacts, relation: str | None, choice: Any,
                  values: dict[str, str | None]) -> dict[str, str | None]:
    """`values` with the params `step` sets by choosing `relation` and `choice` (a key index or a value)."""
    values = dict(values)
    if step.relation_name is not None:
        values[step.relation_name] = relation
    if step.kind in ("filter", "relate_filter"):
        for name, value in zip(step.names, facts.table.keys[choice], strict=True):
            values[name] = value
    elif step.kind == "filter_value":
        values[step.names[0]] = choice
    return values


@dataclass
class Found:
    values: dict[str, str | None]
    answer: str
    outputs: list[Any] = field(default_factory=list)


def make_plan(template: Template) -> Plan:
    null = template.null_params
    steps = []
    assigned_by: dict[str, int] = {}
    for i, node in enumerate(template.nodes):
        for name in node.value_inputs:
            assigned_by[name] = i
    neq_at: dict[int, list[tuple[str, str]]] = {}
    for c in template.constraints:
        if c.kind == "NEQ":
            neq_at.setdefault(max(assigned_by[c.params[0]], assigned_by[c.params[1]]), []).append(c.params)
    for i, node in enumerate(template.nodes):
        function = node.function
        relation_name = None
        names = node.value_inputs
        if function in COMPOSITES:
            kind = "relate_filter" if function.startswith("relate") else "filter"
            if kind == "relate_filter":
                relation_name, names = names[0], names[1:]
        elif function == "relate":
            kind, relation_name, names = "relate", names[0], ()
        elif names:
            kind = "filter_value"
        else:
            kind = "fixed"
        allowed = sum(1 << j for j, n in enumerate(names) if n not in null) if kind != "filter_value" else 0
        out_neq = tuple(
            min(c.params) for c in template.constraints if c.kind == "OUT_NEQ" and max(c.params) == i
        )
        base = node.inputs[0] if node.inputs else i
        if kind == "filter" and output_type(template.nodes[i - 1].function) == SET:
            base = i - 1
        steps.append(
            Step(function, node.inputs, kind, tuple(names), relation_name, tail_of(function), allowed,
                 out_neq, tuple(neq_at.get(i, ())), base)
        )
    last_choice = max((i for i, s in enumerate(steps) if s.kind != "fixed"), default=-1)
    has_raw_relate = any(s.kind == "relate" for s in steps)
    return Plan(template, tuple(steps), last_choice, has_raw_relate)


# An option at a step: (relation or None, key index / value or None, output, selection).
Option = tuple[str | None, Any, Any, int]


class Search:
    """One attempt at a template on a scene; `run()` gives a Found or None."""

    def __init__(
        self,
        plan: Plan,
        facts: GenerationFacts,
        rng: np.random.Generator,
        accept: Callable[[str], bool] | None,
        budget: int = 64,
    ) -> None:
        self.plan = plan
        self.facts = facts
        self.rng = rng
        self.accept = accept
        self.budget = budget

    def run(self) -> Found | None:
        return self._descend(0, [], [], {})

    # ------------------------------------------------------------ options

    def options(self, step: Step, outputs: list[Any]) -> list[Option]:
        """Every valid choice of params at `step`, given the outputs of the nodes before it."""
        facts = self.facts
        source = outputs[step.inputs[0]]
        if step.kind == "filter":
            found = facts.filter_options(source, step.allowed, step.tail == "unique", step.function != "filter")
            return [(None, k, finish_selection(step.tail, m), m) for k, m in found]
        if step.kind == "relate_filter":
            options = []
            key_masks = facts.key_masks
            for relation in RELATIONS:
                related = facts.relate[relation][source]
                for k, m in facts.filter_options(related, step.allowed, step.tail == "unique", True):
                    if key_masks[k] & ~related:  # the relation must rule something out
                        options.append((relation, k, finish_selection(step.tail, m), m))
            return options
        if step.kind == "relate":
            return [(r, None, facts.relate[r][source], facts.relate[r][source]) for r in RELATIONS]
        attribute = step.function[7:]
        if step.names[0] in self.plan.template.null_params:
            return []
        options = []
        for value, mask in facts.value_masks[attribute].items():
            matched = source & mask
            if matched != source:
                options.append((None, value, matched, matched))
        return options

    def _assign(self, step: Step, option: Option, values: dict[str, str | None]) -> dict[str, str | None]:
        relation, choice, _, _ = option
        return assign_values(step, self.facts, relation, choice, values)

    def _keeps_constraints(self, step: Step, selection: Any, selections: list[Any]) -> bool:
        return all(selections[j] != selection for j in step.out_neq)

    @staticmethod
    def _keeps_neq(step: Step, values: dict[str, str | None]) -> bool:
        return all(values[a] is None or values[a] != values[b] for a, b in step.neq)

    # ------------------------------------------------------------ search

    def _descend(self, i: int, outputs: list[Any], selections: list[Any], values: dict[str, str | None]) -> Found | None:
        steps = self.plan.steps
        if i == len(steps):  # a template without params: one candidate
            return self._finish([(None, outputs)], None, values)
        step = steps[i]
        if step.kind == "fixed":
            output = apply_fixed(step.function, [outputs[j] for j in step.inputs], self.facts)
            if output is INVALID or not self._keeps_constraints(step, output, selections):
                return None
            return self._descend(i + 1, outputs + [output], selections + [output], values)
        options = self.options(step, outputs)
        if step.out_neq:
            options = [o for o in options if self._keeps_constraints(step, o[3], selections)]
        if not options:
            return None
        if i == self.plan.last_choice:
            return self._choose_last(i, step, options, outputs, selections, values)
        for position in self.rng.permutation(len(options)):
            if self.budget <= 0:
                return None
            self.budget -= 1
            option = options[position]
            chosen = self._assign(step, option, values)
            if step.neq and not self._keeps_neq(step, chosen):
                continue
            found = self._descend(i + 1, outputs + [option[2]], selections + [option[3]], chosen)
            if found is not None:
                return found
        return None

    def _run_suffix(self, start: int, outputs: list[Any], selections: list[Any]) -> list[Any] | None:
        """Outputs after running the fixed steps from `start`, None when one fails."""
        outputs = list(outputs)
        selections = list(selections)
        for step in self.plan.steps[start:]:
            output = apply_fixed(step.function, [outputs[j] for j in step.inputs], self.facts)
            if output is INVALID or not self._keeps_constraints(step, output, selections):
                return None
            outputs.append(output)
            selections.append(output)
        return outputs

    def _choose_last(
        self, i: int, step: Step, options: list[Option], outputs: list[Any], selections: list[Any],
        values: dict[str, str | None],
    ) -> Found | None:
        # Options sharing a selection share everything downstream: run the suffix once per selection.
        suffix_by_selection: dict[int, list[Any] | None] = {}
        candidates: list[tuple[Option | None, list[Any]]] = []
        for option in options:
            selection = option[3]
            if selection not in suffix_by_selection:
                suffix_by_selection[selection] = self._run_suffix(
                    i + 1, outputs + [option[2]], selections + [selection]
                )
            final = suffix_by_selection[selection]
            if final is not None:
                candidates.append((option, final))
        return self._finish(candidates, step, values)

    def _finish(
        self, candidates: list[tuple[Option | None, list[Any]]], step: Step | None, values: dict[str, str | None]
    ) -> Found | None:
        """Draw one complete candidate: its answer first (balanced), then one with that answer."""
        by_answer: dict[str, list[int]] = {}
        for index, (_, final) in enumerate(candidates):
            answer = format_answer(final[-1])
            if answer is not None:
                by_answer.setdefault(answer, []).append(index)
        if self.accept is None:
            # Unbalanced: every candidate equally likely, so common answers stay common.
            pools = [[index for indices in by_answer.values() for index in indices]]
        else:
            answers = [a for a in by_answer if self.accept(a)]
            order = self.rng.permutation(len(answers)) if answers else []
            pools = [list(by_answer[answers[j]]) for j in order]
        for pool in pools:
            while pool:
                option, final = candidates[pool.pop(int(self.rng.integers(len(pool))))]
                chosen = values if option is None or step is None else self._assign(step, option, values)
                if step is not None and step.neq and not self._keeps_neq(step, chosen):
                    continue
                answer = format_answer(final[-1])
                if self.plan.has_raw_relate and is_degenerate(self.plan.template, self.facts, chosen, answer):
                    continue
                return Found(chosen, answer, final)
        return None


def describe_matches(values: tuple[str, ...], key: tuple[str | None, ...]) -> bool:
    """Whether an object with attribute `values` fits the description `key`."""
    return all(k is None or k == v for k, v in zip(key, values, strict=True))


def anchor_fits_other_description(plan: Plan, values: dict[str, str | None], outputs: list[Any], facts: GenerationFacts) -> bool:
    """For "other" questions (a `same_<attr>` node): does the anchor object fit the description after it?

    When it cannot ("other cubes the same color as the sphere"), "other" says
    nothing and the text drops it; when it can, "other" is what excludes it.
    """
    nodes = plan.template.nodes
    for i, node in enumerate(nodes):
        if not node.function.startswith("same_"):
            continue
        anchor = outputs[node.inputs[0]]
        for later in nodes[i + 1:]:
            if later.inputs == (i,) and later.function in COMPOSITES and not later.function.startswith("relate"):
                key = tuple(values[n] for n in later.value_inputs)
                return describe_matches(facts.values[anchor], key)
        return True
    return True

