"""QuestionGenerator: scenes in, CLEVR question dicts out, balanced and reproducible from a seed.

Per scene, templates are tried least-used first (ties in random order), each at
most once per pass, until enough questions are found; a template that finds
nothing on a scene is not tried again on it. Template use counts and per-template
answer counts carry over from call to call, so a dataset generated scene by
scene is balanced as a whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.programs.program import Program, program_to_json
from clevr_game.questions.balance import AnswerBalancer, answer_universe
from clevr_game.questions.expand import expand_program
from clevr_game.questions.facts import GenerationFacts
from clevr_game.questions.search import Plan, Search, anchor_fits_other_description, make_plan
from clevr_game.questions.templates import Template, default_templates
from clevr_game.questions.text import load_synonyms, realise
from clevr_game.scene import Scene
from clevr_game.vocab import CLEVR, Vocabulary


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
    """Questions from templates; every random choice comes from one numpy Generator seeded by `seed`."""

    def __init__(
        self,
        templates: Sequence[Template] | None = None,
        vocabulary: Vocabulary = CLEVR,
        synonyms: str | Path | Mapping[str, Sequence[str]] | None = None,
        seed: int = 0,
        *,
        balance: bool = True,
        search_budget: int = 64,
    ) -> None:
        self.templates: list[Template] = list(templates) if templates is not None else default_templates()
        self.vocabulary = vocabulary
        self.synonyms = load_synonyms(synonyms)
        self.rng = np.random.default_rng(seed)
        self.balance = balance
        self.search_budget = search_budget
        self.plans: list[Plan] = [make_plan(t) for t in self.templates]
        self.template_counts = [0] * len(self.templates)
        self.balancer = AnswerBalancer()
        for position, template in enumerate(self.templates):
            self.balancer.start(position, answer_universe(template.answer_type, vocabulary))

    def generate(self, scene: Scene, num_questions: int) -> list[dict[str, Any]]:
        """Up to `num_questions` distinct questions about `scene`, as CLEVR question dicts."""
        return [instance.to_json() for instance in self.generate_instances(scene, num_questions)]

    def generate_instances(self, scene: Scene, num_questions: int) -> list[Instance]:
        """Like `generate`, keeping the template and param values of each question."""
        facts = GenerationFacts(scene, self.vocabulary)
        found: list[Instance] = []
        seen: set[Program] = set()
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
        )
