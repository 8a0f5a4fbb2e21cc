"""Question generation speed on random valid 10-object scenes: the generator against naive rejection sampling.

The baseline draws a template and every param at random (each attribute value or
empty, each relation), judges the assignment with the same rules (`check_instance`)
and the same answer balancer, and keeps it when valid: the same questions are
acceptable to both, only the way of finding them differs (the baseline does not
even the template mix, which only makes it faster). Both write full question
dicts (text and expanded program) and both fill every scene with 10 questions.
Run: python -m perf.questions
"""

from __future__ import annotations

import time

import numpy as np

from clevr_game.datafiles import CLEVR_TEMPLATE_DIR
from clevr_game.generate import generate_scene
from clevr_game.questions import (
    QuestionGenerator,
    Rejected,
    Template,
    check_instance,
    load_templates,
)
from clevr_game.questions.balance import AnswerBalancer, answer_universe
from clevr_game.questions.expand import expand_program
from clevr_game.questions.facts import GenerationFacts
from clevr_game.questions.generator import Instance
from clevr_game.questions.text import realise
from clevr_game.scene import Scene
from clevr_game.vocab import CLEVR, RELATIONS
from perf.timing import print_table, row

QUESTIONS_PER_SCENE = 10
CLEVR_TEMPLATES = CLEVR_TEMPLATE_DIR


def random_scenes(count: int, seed: int = 0) -> list[Scene]:
    rng = np.random.default_rng(seed)
    return [generate_scene(rng, 10, image_index=i) for i in range(count)]


class NaiveRejectionSampler:
    """Pick a template and all its params at random, keep the draw when it is a valid, accepted question."""

    def __init__(self, templates: list[Template], seed: int = 0, attempts_per_question: int = 2000) -> None:
        self.generator = QuestionGenerator(templates, seed=seed)  # for its synonyms and balancer layout
        self.templates = templates
        self.rng = np.random.default_rng(seed)
        self.attempts_per_question = attempts_per_question
        self.balancer = AnswerBalancer()
        for position, template in enumerate(templates):
            self.balancer.start(position, answer_universe(template.answer_type, CLEVR))

    def _draw(self, template: Template) -> dict[str, str | None]:
        values: dict[str, str | None] = {}
        for name, kind in template.params.items():
            if kind == "relation":
                values[name] = RELATIONS[int(self.rng.integers(len(RELATIONS)))]
            else:
                choices = CLEVR.values(kind)
                pick = int(self.rng.integers(len(choices) + 1))
                values[name] = choices[pick - 1] if pick else None
        return values

    def generate(self, scene: Scene, num_questions: int) -> list[dict]:
        facts = GenerationFacts(scene, CLEVR)
        found: list[dict] = []
        seen: set[tuple] = set()
        for _ in range(self.attempts_per_question * num_questions):
            if len(found) == num_questions:
                break
            position = int(self.rng.integers(len(self.templates)))
            template = self.templates[position]
            values = self._draw(template)
            identity = (position, tuple(values.values()))
            if identity in seen:
                continue
            try:
                answer = check_instance(template, facts, values)
            except Rejected:
                continue
            if not self.balancer.accepts(position, answer):
                continue
            self.balancer.record(position, answer)
            seen.add(identity)
            text = template.texts[int(self.rng.integers(len(template.texts)))]
            instance = Instance(template, values, answer, expand_program(template, values),
                                realise(text, template.params, values, self.generator.synonyms, self.rng),
                                scene.image_index, scene.image_filename, scene.split)
            found.append(instance.to_json())
        return found


def questions_per_second(make, scenes: list[Scene]) -> float:
    """Questions per second of a fresh generator asked for QUESTIONS_PER_SCENE on each of `scenes`."""
    generator = make()
    start = time.perf_counter()
    total = sum(len(generator.generate(scene, QUESTIONS_PER_SCENE)) for scene in scenes)
    return total / (time.perf_counter() - start)


def run(quick: bool = False) -> list[dict]:
    scenes = random_scenes(30 if quick else 300)
    baseline_scenes = scenes[: 6 if quick else 40]
    suites = [("own templates", None)]
    if CLEVR_TEMPLATES.is_dir():
        suites.append(("CLEVR's 90 templates", load_templates(CLEVR_TEMPLATES)))
    rows = []
    for label, templates in suites:
        listed = templates if templates is not None else QuestionGenerator().templates
        ours = questions_per_second(lambda t=listed: QuestionGenerator(t, seed=0), scenes)
        naive = questions_per_second(lambda t=listed: NaiveRejectionSampler(t, seed=0), baseline_scenes)
        rows.append(row(f"questions, 10-object scenes, {label}", "questions/s", naive, ours,
                        ">= 10x naive; 100k questions < 1 min"))
    return rows


if __name__ == "__main__":
    print_table(run())
