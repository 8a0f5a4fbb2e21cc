"""Questions from templates: CLEVR 1.0 template files in, CLEVR question dicts (text, program, answer) out.

    from clevr_game.datafiles import CLEVR_TEMPLATE_DIR
    from clevr_game.questions import QuestionGenerator, load_templates
    generator = QuestionGenerator(seed=0)          # the project's own templates
    questions = generator.generate(scene, 10)

    # CLEVR's 90 templates, drawn as CLEVR's own generator draws them
    generator = QuestionGenerator(load_templates(CLEVR_TEMPLATE_DIR), seed=0, sampling="clevr")
"""

from clevr_game.questions.evaluate import SAMPLINGS, Rejected, check_instance
from clevr_game.questions.expand import expand_program
from clevr_game.questions.facts import GenerationFacts
from clevr_game.questions.generator import Instance, QuestionGenerator
from clevr_game.questions.templates import (
    TEMPLATE_SETS,
    Template,
    choose_templates,
    default_sampling,
    default_templates,
    load_templates,
)
from clevr_game.questions.text import load_synonyms

__all__ = [
    "GenerationFacts", "Instance", "QuestionGenerator", "Rejected", "SAMPLINGS", "Template", "check_instance",
    "TEMPLATE_SETS", "choose_templates", "default_sampling", "default_templates", "expand_program", "load_synonyms",
    "load_templates",
]
