"""Instantiate one template on one scene the way CLEVR's own generator does (`sampling="clevr"`).

CLEVR's `question_generation/generate_questions.py` searches depth first: it expands a
template node into all its options, visits them in random order and keeps the first
complete question that its answer balancing accepts. That is the same as choosing, at
every node, uniformly among the options under which some accepted question exists,
which is what this search does, on the scene's bitmasks. At the last node with params
it judges every option at once, grouped by output (everything after it depends on the
output alone), so a subtree holding no accepted question is dismissed without drawing
its random descriptions.

Options of a composite, each a key (a value or None for size, color, material, shape):
- `filter_unique`: every key that describes some object of the scene and matches one
  object of the base set; `filter_count` and `filter`: every such key whatever it matches
  (`filter` without the empty key), plus one random description per key that matches one
  object; `filter_exist`: every such key plus as many random descriptions. The base set
  is the output of the node before (CLEVR reads the last node's output), which is the
  composite's input in all of CLEVR's templates but `single_or` 5's second `filter`.
- A random description draws each attribute uniformly among its values and None, so it
  may match nothing; drawn afresh each time its node is expanded.
- `relate_filter*`: every relation with every scene key; `_unique` keeps those relating one
  object, only `_count` and `_exist` keep those relating none. An option whose key's objects
  are all related (trivial: the relation adds nothing) is kept for about one option in ten:
  round(N / 9) of them at random, N the number of the others.
- Options naming a NULL param are dropped after the counts above are taken, as CLEVR's
  search drops them when it reaches them.
Raw `relate` nodes offer the four relations, template `filter_<attr>` nodes every value.
Outputs are compared for OUT_NEQ (two counts must differ), and a question with a raw
`relate` must not be degenerate. There is no budget: like CLEVR's, the search is exhaustive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from clevr_game.questions.evaluate import INVALID, apply_fixed, finish_selection, format_answer
from clevr_game.questions.facts import GenerationFacts
from clevr_game.questions.search import Found, Plan, Step, assign_values
from clevr_game.vocab import RELATIONS

TRIVIAL_SHARE = 0.1
"""CLEVR's `trivial_frac`: about this share of a relation's options may add nothing."""

# An option at a node: (relation or None, key index / value or None, output).
Option = tuple[str | None, Any, Any]


@dataclass(frozen=True)
class Options:
    """A node's options before the random ones are drawn."""

    fixed: list[Option]
    """The options every expansion of the node offers (NULL-free)."""
    draws: int = 0
    """Random descriptions to add (those naming a NULL param are then dropped)."""
    trivial: tuple[Option, ...] = ()
    """Relation options that add nothing, NULL ones included ..."""
    keep: int = 0
    """... of which this many, drawn at random, are offered."""


def _single(mask: int) -> bool:
    return mask != 0 and mask & (mask - 1) == 0


class ClevrSearch:
    """One attempt at a template on a scene; `run()` gives a Found or None."""

    def __init__(
        self, plan: Plan, facts: GenerationFacts, rng: np.random.Generator, accept: Callable[[str], bool] | None
    ) -> None:
        self.plan = plan
        self.facts = facts
        self.rng = rng
        self.accept = accept
        self._possible_memo: dict[tuple[int, tuple[Any, ...]], bool] = {}

    def run(self) -> Found | None:
        return self._descend(0, [], {})

    # ------------------------------------------------------------ options

    def options(self, step: Step, outputs: list[Any]) -> Options:
        """The options of `step` given the outputs of the nodes before it (memoised per scene)."""
        facts = self.facts
        source = outputs[step.inputs[0]]
        if step.kind == "filter_value" and step.names[0] in self.plan.template.null_params:
            return Options([])
        if step.kind == "filter":
            memo_key = ("filter", step.function, step.allowed, outputs[step.base], source)
        elif step.kind == "relate_filter":
            memo_key = ("relate_filter", step.function, step.allowed, source)
        else:
            memo_key = (step.kind, step.function, source)
        found = facts.memo.get(memo_key)
        if found is None:
            if step.kind == "filter":
                found = self._filter_options(step, outputs[step.base], source)
            elif step.kind == "relate_filter":
                found = self._relate_options(step, source)
            elif step.kind == "relate":
                found = Options([(r, None, facts.relate[r][source]) for r in RELATIONS])
            else:
                attribute = step.function[7:]
                found = Options([(None, v, source & m) for v, m in facts.value_masks[attribute].items()])
            facts.memo[memo_key] = found
        return found

    def _filter_options(self, step: Step, base: int, source: int) -> Options:
        facts = self.facts
        key_masks, positions = facts.key_masks, facts.table.positions
        unique = step.tail == "unique"
        fixed: list[Option] = []
        offered = singles = 0
        for k in facts.scene_keys:
            if k == 0 and step.function == "filter":
                continue
            one = _single(base & key_masks[k])
            if unique and not one:
                continue
            offered += 1
            singles += one
            if positions[k] & ~step.allowed:
                continue
            output = finish_selection(step.tail, source & key_masks[k])
            if output is not INVALID:
                fixed.append((None, k, output))
        draws = 0 if unique else offered if step.tail == "exist" else singles
        return Options(fixed, draws=draws)

    def _relate_options(self, step: Step, anchor: int) -> Options:
        facts = self.facts
        key_masks, positions = facts.key_masks, facts.table.positions
        unique = step.tail == "unique"
        with_empty = step.tail in ("count", "exist")
        fixed: list[Option] = []
        trivial: list[Option] = []
        others = 0
        for relation in RELATIONS:
            related = facts.relate[relation][anchor]
            for k in facts.scene_keys:
                matched = related & key_masks[k]
                if (unique and not _single(matched)) or (not with_empty and not matched):
                    continue
                option = (relation, k, finish_selection(step.tail, matched))
                if matched == key_masks[k]:
                    trivial.append(option)
                    continue
                others += 1
                if not positions[k] & ~step.allowed:
                    fixed.append(option)
        keep = int(round(others * TRIVIAL_SHARE / (1 - TRIVIAL_SHARE)))
        return Options(fixed, trivial=tuple(trivial), keep=keep)

    def _description_output(self, step: Step, key: int, outputs: list[Any]) -> Any:
        """The output of a composite under a random description; INVALID when CLEVR's program would differ."""
        source = outputs[step.inputs[0]]
        if key == 0 and step.function == "filter" and step.base != step.inputs[0]:
            # CLEVR emits no node for an empty filter and reads the node before it instead.
            return source if outputs[step.base] == source else INVALID
        return finish_selection(step.tail, source & self.facts.key_masks[key])

    def _draw(self, step: Step, outputs: list[Any], options: Options) -> list[Option]:
        """The random part of a node's options, drawn afresh, NULL ones dropped."""
        positions = self.facts.table.positions
        drawn: list[Option] = []
        if options.draws:
            table = self.facts.table
            digits = self.rng.integers(0, table.radices, size=(options.draws, len(table.radices)))
            for key in (digits @ np.asarray(table.strides)).tolist():
                if not positions[key] & ~step.allowed:
                    drawn.append((None, key, self._description_output(step, key, outputs)))
        if options.keep:
            trivial = options.trivial
            if options.keep < len(trivial):
                trivial = tuple(trivial[j] for j in self.rng.permutation(len(trivial))[: options.keep])
            drawn.extend(o for o in trivial if not positions[o[1]] & ~step.allowed)
        return drawn

    def _possible_draws(self, step: Step, outputs: list[Any], options: Options) -> Iterable[Any]:
        """Every output the random part of the options could give."""
        if options.keep:
            yield from (o[2] for o in options.trivial if not self.facts.table.positions[o[1]] & ~step.allowed)
        if options.draws:
            memo_key = ("draws", step.function, step.allowed, outputs[step.base], outputs[step.inputs[0]])
            possible = self.facts.memo.get(memo_key)
            if possible is None:
                allowed_keys = self.facts.table.within[step.allowed]
                possible = {self._description_output(step, k, outputs) for k in allowed_keys}
                self.facts.memo[memo_key] = possible
            yield from possible

    # ------------------------------------------------------------ search

    def _assign(self, step: Step, option: Option, values: dict[str, str | None]) -> dict[str, str | None]:
        relation, choice, _ = option
        return assign_values(step, self.facts, relation, choice, values)

    @staticmethod
    def _keeps_out_neq(step: Step, output: Any, outputs: list[Any]) -> bool:
        return all(outputs[j] != output for j in step.out_neq)

    @staticmethod
    def _keeps_neq(step: Step, values: dict[str, str | None]) -> bool:
        return all(values[a] is None or values[a] != values[b] for a, b in step.neq)

    def _descend(self, i: int, outputs: list[Any], values: dict[str, str | None]) -> Found | None:
        steps = self.plan.steps
        if i == len(steps):  # a template without params: one candidate
            answer = format_answer(outputs[-1])
            if answer is None or (self.accept is not None and not self.accept(answer)):
                return None
            return Found(values, answer, outputs)
        step = steps[i]
        if step.kind == "fixed":
            output = self._fixed(step, outputs)
            if output is INVALID:
                return None
            return self._descend(i + 1, outputs + [output], values)
        if not self._possible(i, outputs):
            return None
        options = self.options(step, outputs)
        if i == self.plan.last_choice:
            return self._choose_last(i, step, options, outputs, values)
        offered = options.fixed + self._draw(step, outputs, options)
        for position in self.rng.permutation(len(offered)):
            option = offered[position]
            output = option[2]
            if output is INVALID or not self._keeps_out_neq(step, output, outputs):
                continue
            chosen = self._assign(step, option, values)
            if step.neq and not self._keeps_neq(step, chosen):
                continue
            found = self._descend(i + 1, outputs + [output], chosen)
            if found is not None:
                return found
        return None

    def _fixed(self, step: Step, outputs: list[Any]) -> Any:
        """A fixed node's output, INVALID when it fails or breaks OUT_NEQ."""
        output = apply_fixed(step.function, [outputs[j] for j in step.inputs], self.facts, strict=False)
        if output is INVALID or not self._keeps_out_neq(step, output, outputs):
            return INVALID
        return output

    def _possible(self, i: int, outputs: list[Any]) -> bool:
        """Whether an accepted question could follow, were every random option drawn (NEQ and degeneracy aside).

        When it could not, no draw can change that, so skipping the draws leaves the
        distribution as it is; the answer depends on the outputs alone, so it is kept
        for every other way of reaching them (many descriptions name the same object).
        """
        key = (i, tuple(outputs))
        known = self._possible_memo.get(key)
        if known is not None:
            return known
        steps = self.plan.steps
        if i == len(steps):
            answer = format_answer(outputs[-1])
            result = answer is not None and (self.accept is None or self.accept(answer))
        elif steps[i].kind == "fixed":
            output = self._fixed(steps[i], outputs)
            result = output is not INVALID and self._possible(i + 1, outputs + [output])
        else:
            step = steps[i]
            options = self.options(step, outputs)
            reachable = {o[2] for o in options.fixed}
            reachable.update(self._possible_draws(step, outputs, options))
            result = any(
                output is not INVALID and self._keeps_out_neq(step, output, outputs)
                and self._possible(i + 1, outputs + [output])
                for output in reachable
            )
        self._possible_memo[key] = result
        return result

    def _choose_last(
        self, i: int, step: Step, options: Options, outputs: list[Any], values: dict[str, str | None]
    ) -> Found | None:
        # Everything after this node is fixed: the rest of the program runs once per output.
        finals: dict[Any, list[Any] | None] = {}
        candidates = []
        for option in options.fixed + self._draw(step, outputs, options):
            output = option[2]
            if output not in finals:
                finals[output] = None
                if output is not INVALID and self._keeps_out_neq(step, output, outputs):
                    final = self._run_suffix(i + 1, outputs + [output])
                    answer = None if final is None else format_answer(final[-1])
                    if answer is not None and (self.accept is None or self.accept(answer)):
                        finals[output] = final
            if finals[output] is not None:
                candidates.append(option)
        if step.neq:
            candidates = [o for o in candidates if self._keeps_neq(step, self._assign(step, o, values))]
        if self.plan.has_raw_relate and candidates:
            degenerate = self._degeneracy(i, step, outputs, values)
            candidates = [o for o in candidates if not degenerate(o, format_answer(finals[o[2]][-1]))]
        if not candidates:
            return None
        # CLEVR's search takes the first in a random order that passes: uniform among those that pass.
        option = candidates[int(self.rng.integers(len(candidates)))]
        final = finals[option[2]]
        return Found(self._assign(step, option, values), format_answer(final[-1]), final)

    # ------------------------------------------------------------ degeneracy

    def _degeneracy(
        self, i: int, step: Step, outputs: list[Any], values: dict[str, str | None]
    ) -> Callable[[Option, str], bool]:
        """CLEVR's degeneracy test for the options of the last node with params, as a function of the option.

        A question is degenerate when replacing a raw `relate` node's output by the
        whole scene keeps its answer (`is_degenerate` in evaluate.py). The nodes before
        this one are rerun once per `relate` node; the rest once per distinct output.
        """
        steps = self.plan.steps
        rerun: list[list[Any] | None] = []  # per relate node: the outputs before node i, or None (node i itself)
        for r in range(i + 1):
            if steps[r].kind != "relate":
                continue
            if r == i:
                rerun.append(None)
                continue
            changed: list[Any] = []
            for j in range(i):
                changed.append(self.facts.all if j == r else self._output_under(steps[j], changed, values))
            rerun.append(changed)
        answers: dict[tuple[int, Any], str | None] = {}

        def degenerate(option: Option, answer: str) -> bool:
            for n, changed in enumerate(rerun):
                here = self.facts.all if changed is None else self._option_output(step, option, changed)
                if (n, here) not in answers:
                    final = self._run_plain(i + 1, (outputs if changed is None else changed) + [here])
                    answers[n, here] = None if final is None else format_answer(final[-1])
                if answers[n, here] == answer:
                    return True
            return False

        return degenerate

    def _option_output(self, step: Step, option: Option, outputs: list[Any]) -> Any:
        """The output of `step` under `option` given other outputs before it (INVALID passes through)."""
        facts = self.facts
        relation, choice, _ = option
        source = outputs[step.inputs[0]]
        if source is INVALID:
            return INVALID
        if step.kind == "filter":
            if choice == 0 and step.function == "filter":
                return outputs[step.base]  # CLEVR emits no node for an empty filter
            return finish_selection(step.tail, source & facts.key_masks[choice])
        if step.kind == "relate_filter":
            return finish_selection(step.tail, facts.relate[relation][source] & facts.key_masks[choice])
        if step.kind == "relate":
            return facts.relate[relation][source]
        if step.kind == "filter_value":
            return source & facts.value_masks[step.function[7:]][choice]
        return self._plain(step, outputs)

    def _output_under(self, step: Step, outputs: list[Any], values: dict[str, str | None]) -> Any:
        """The output of `step` under the param values chosen, given other outputs before it."""
        if step.kind == "fixed":
            return self._plain(step, outputs)
        relation = values[step.relation_name] if step.relation_name is not None else None
        if step.kind in ("filter", "relate_filter"):
            choice = self.facts.table.index[tuple(values[name] for name in step.names)]
        else:
            choice = values[step.names[0]] if step.names else None
        return self._option_output(step, (relation, choice, None), outputs)

    def _plain(self, step: Step, outputs: list[Any]) -> Any:
        """A fixed node as CLEVR's executor runs it: no constraints, INVALID passes through."""
        args = [outputs[j] for j in step.inputs]
        if any(a is INVALID for a in args):
            return INVALID
        return apply_fixed(step.function, args, self.facts, strict=False)

    def _run_plain(self, start: int, outputs: list[Any]) -> list[Any] | None:
        outputs = list(outputs)
        for step in self.plan.steps[start:]:
            output = self._plain(step, outputs)
            if output is INVALID:
                return None
            outputs.append(output)
        return outputs

    def _run_suffix(self, start: int, outputs: list[Any]) -> list[Any] | None:
        """Outputs after running the fixed steps from `start`, None when one fails."""
        outputs = list(outputs)
        for step in self.plan.steps[start:]:
            output = self._fixed(step, outputs)
            if output is INVALID:
                return None
            outputs.append(output)
        return outputs
