"""QuestionGenerator: scenes in, CLEVR question dicts out, balanced and reproducible from a seed.

Two samplings (`sampling=`), both with per-template answer balancing (balance.py)
and counts that carry over from call to call, so a dataset generated scene by
scene is balanced as a whole:

- `clevr`: CLEVR's own generator's distribution (clevr_search.py). Per scene the
  templates are tried once each, fewest questions so far first, until enough are
  found; ties go in a fixed order, a permutation drawn from the seed when the
  generator is made (CLEVR's is its `os.listdir` order, which no seed reproduces).
  Template and answer counts restart every `reset_every` scenes (CLEVR: 250).
  Descriptions name as many attributes as CLEVR's do, needed or not; the text
  uses CLEVR's synonyms and drops "other" by CLEVR's heuristic.
- `minimal` (the default here, and `generate`'s for the project's own templates):
  descriptions name only the attributes needed, relations and filters always
  remove something (search.py, evaluate.py). Templates are tried least-used
  first (ties in random order), each at most once per pass, until enough
  questions are found; a template that finds nothing on a scene is not tried
  again on it.

Either way a scene never gets the same program twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.datafiles import CLEVR_SYNONYMS
from clevr_game.programs.program import Program, program_to_json
from clevr_game.questions.balance import AnswerBalancer, answer_universe
from clevr_game.questions.clevr_search import ClevrSearch
from clevr_game.questions.evaluate import SAMPLINGS
from clevr_game.questions.expand import expand_program
from clevr_game.questions.facts import GenerationFacts
from clevr_game.questions.search import Plan, Search, anchor_fits_other_description, make_plan
from clevr_game.questions.templates import Template, default_templates
from clevr_game.questions.text import clevr_drops_other, load_synonyms, realise
from clevr_game.scene import Scene
from clevr_game.vocab import CLEVR, Vocabulary

CLEVR_RESET_EVERY = 250
"""CLEVR's `--reset_counts_every`: scenes after which its template and answer counts restart."""


@dataclass(frozen=True)
class Instance:
    """One generated question before it becomes JSON: which template, which params, what answer."""

    template: Template
    values: dict[str, str | None]
    answer: str
    program: Program
    text: str
    image_index: int | None
    image_filename: str | None
    split: str | None
    sampling: str = "minimal"
    """The rules the question keeps (`check_instance(..., sampling=)`)."""

    def to_json(self) -> dict[str, Any]:
        """The CLEVR question dict (the caller numbers `question_index`)."""
        return {
            "image_index": self.image_index,
            "image_filename": self.image_filename,
            "split": self.split,
            "question": self.text,
            "program": program_to_json(self.program),
            "answer": self.answer,
            "question_family_index": self.template.family_index,
            "template_filename": self.template.filename,
        }


class QuestionGenerator:
    """Questions from templates; every random choice comes from one numpy Generator seeded by `seed`.

    :param templates: the templates (default: the project's own, `default_templates()`)
    :param vocabulary: the attribute values scenes and questions use
    :param synonyms: word -> phrasings for the text, a JSON path or a mapping (default: CLEVR's
        `synonyms.json` for `clevr` sampling, the project's file for `minimal`)
    :param seed: seeds the one numpy Generator all draws come from
    :param balance: per-template answer balancing (CLEVR's rules, balance.py)
    :param search_budget: options a `minimal` search tries before giving up on a template
    :param sampling: `minimal` (only needed attributes named) or `clevr` (CLEVR's generator's
        distribution); the module docstring says what each does
    :param reset_every: scenes after which template and answer counts restart (default:
        CLEVR's 250 for `clevr`, never for `minimal`)
    """

    def __init__(
        self,
        templates: Sequence[Template] | None = None,
        vocabulary: Vocabulary = CLEVR,
        synonyms: str | Path | Mapping[str, Sequence[str]] | None = None,
        seed: int = 0,
        *,
        balance: bool = True,
        search_budget: int = 64,
        sampling: str = "minimal",
        reset_every: int | None = None,
    ) -> None:
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling {sampling!r}: expected one of {', '.join(SAMPLINGS)}")
        if reset_every is not None and reset_every < 1:
            raise ValueError(f"reset_every {reset_every}: expected a number of scenes >= 1, or None")
        self.templates: list[Template] = list(templates) if templates is not None else default_templates()
        self.vocabulary = vocabulary
        if synonyms is None and sampling == "clevr":
            synonyms = CLEVR_SYNONYMS
        self.synonyms = load_synonyms(synonyms)
        self.rng = np.random.default_rng(seed)
        self.balance = balance
        self.search_budget = search_budget
        self.sampling = sampling
        if reset_every is None and sampling == "clevr":
            reset_every = CLEVR_RESET_EVERY
        self.reset_every = reset_every
        self.plans: list[Plan] = [make_plan(t) for t in self.templates]
        self.universes = [answer_universe(t.answer_type, vocabulary) for t in self.templates]
        self.scenes_seen = 0
        self._restart_counts()
        # Only `clevr` draws here: `minimal` keeps the random stream it always had.
        self.tie_rank: list[int] = []
        if sampling == "clevr":
            self.tie_rank = self.rng.permutation(len(self.templates)).tolist()

    def _restart_counts(self) -> None:
        self.template_counts = [0] * len(self.templates)
        self.balancer = AnswerBalancer()
        for position, universe in enumerate(self.universes):
            self.balancer.start(position, universe)

    def generate(self, scene: Scene, num_questions: int) -> list[dict[str, Any]]:
        """Up to `num_questions` distinct questions about `scene`, as CLEVR question dicts."""
        return [instance.to_json() for instance in self.generate_instances(scene, num_questions)]

    def generate_instances(self, scene: Scene, num_questions: int) -> list[Instance]:
        """Like `generate`, keeping the template and param values of each question."""
        facts = GenerationFacts(scene, self.vocabulary)
        if self.reset_every is not None and self.scenes_seen % self.reset_every == 0 and self.scenes_seen:
            self._restart_counts()
        self.scenes_seen += 1
        found: list[Instance] = []
        seen: set[Program] = set()
        if self.sampling == "clevr":
            # One pass in a fixed order by count: CLEVR's round robin over the templates.
            order = sorted(range(len(self.templates)), key=lambda p: (self.template_counts[p], self.tie_rank[p]))
            for position in order:
                if len(found) >= num_questions:
                    break
                instance = self._try_template(position, facts, scene, seen)
                if instance is not None:
                    found.append(instance)
            return found
        active = list(range(len(self.templates)))
        while len(found) < num_questions and active:
            tie_break = self.rng.random(len(active))
            order = sorted(range(len(active)), key=lambda j: (self.template_counts[active[j]], tie_break[j]))
            still_active = []
            for j in order:
                if len(found) >= num_questions:
                    still_active.append(active[j])
                    continue
                position = active[j]
                instance = self._try_template(position, facts, scene, seen)
                if instance is not None:
                    found.append(instance)
                    still_active.append(position)
            active = sorted(still_active)
        return found

    def _try_template(
        self, position: int, facts: GenerationFacts, scene: Scene, seen: set[Program]
    ) -> Instance | None:
        plan = self.plans[position]
        accept = (lambda answer: self.balancer.accepts(position, answer)) if self.balance else None
        if self.sampling == "clevr":
            if accept is not None and not any(accept(a) for a in self.universes[position]):
                return None  # every question would be refused: CLEVR's search would try them all in vain
            result = ClevrSearch(plan, facts, self.rng, accept).run()
        else:
            result = Search(plan, facts, self.rng, accept, self.search_budget).run()
        if result is None:
            return None
        template = plan.template
        program = expand_program(template, result.values)
        # Two templates can expand to one program ("how many other things..." with and
        # without an empty description): a scene never gets the same program twice.
        if program in seen:
            return None
        seen.add(program)
        self.template_counts[position] += 1
        self.balancer.record(position, result.answer)
        text = template.texts[int(self.rng.integers(len(template.texts)))]
        if self.sampling == "clevr":
            drop_other = clevr_drops_other(template.params, result.values)
        else:
            drop_other = not anchor_fits_other_description(plan, result.values, result.outputs, facts)
        return Instance(
            template=template,
            values=result.values,
            answer=result.answer,
            program=program,
            text=realise(text, template.params, result.values, self.synonyms, self.rng, drop_other),
            image_index=scene.image_index,
            image_filename=scene.image_filename,
            split=scene.split,
            sampling=self.sampling,
        )
