"""CLEVR-POC with clingo: environments, constrained scenes, hidden-object questions, the constraint checker.

    from clevr_game.asp import Environment, regions_of
    env = Environment.load("env_000.lp")
    env.check(scene)        # CheckResult(ok, failed=[English sentences])

Submodules import lazily here so `import clevr_game.asp` stays light.
"""

from __future__ import annotations

from typing import Any

POC_MIN_OBJECTS = 5
POC_MAX_OBJECTS = 9
"""Objects of a CLEVR-POC environment: CLEVR-POC's own range, not CLEVR's scene limit (scene.MAX_OBJECTS)."""

_EXPORTS = {
    "Environment": "environment", "CheckResult": "checker",
    "Constraint": "parsing",
    "regions_of": "regions", "region_zones": "regions", "NUM_REGIONS": "regions",
    "ConstraintSpec": "templates", "TEMPLATES": "templates", "match_constraint": "templates",
    "generate_environment": "envgen", "environment_text": "envgen",
    "SceneSampler": "sampling",
    "make_question": "questions", "partial_scene": "questions", "HiddenQuestion": "questions",
    "program_rule": "questions",
    "brave_answers": "solve", "partial_scene_facts": "solve",
    "generate_poc_dataset": "dataset",
    "exact_accuracy": "metrics", "jaccard": "metrics", "mean_jaccard": "metrics",
    "BACKGROUND": "background", "background_program": "background",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'clevr_game.asp' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"clevr_game.asp.{module}"), name)
