"""Random environments: template instances, at least two per region, at most fifteen, satisfiable.

Constraints are added one at a time; each candidate is kept only when clingo
finds the background plus all kept constraints still satisfiable for the
environment's number of objects, and, unless empty regions are allowed, still
satisfiable with an object in each region in turn. Without that test two
constraints such as "Every object in region 3 is green or gray" and "Every
object in region 3 is brown or cyan" pass together while saying, in effect,
that region 3 is empty.
"""

from __future__ import annotations

import clingo
import numpy as np

from clevr_game.asp import POC_MAX_OBJECTS, POC_MIN_OBJECTS
from clevr_game.asp.background import background_program
from clevr_game.asp.clingo_io import new_control
from clevr_game.asp.regions import NUM_REGIONS
from clevr_game.asp.templates import ConstraintSpec
from clevr_game.errors import ClevrGameError, InputError
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC, Vocabulary

MAX_CONSTRAINTS = 15
MIN_PER_REGION = 2

# Template mix for generated environments (weights, not probabilities).
TEMPLATE_WEIGHTS: dict[str, float] = {
    "all_in_region": 1.0, "none_in_region": 1.5, "either_or": 1.5, "exactly_n": 1.0,
    "at_least_n": 0.8, "at_most_n": 1.0, "at_least_pairs": 0.7, "at_most_pairs": 0.7,
    "global_ban": 0.4, "implication": 1.2, "same_in_region": 0.5,
}
ATTRIBUTE_WEIGHTS: dict[str, float] = {"size": 0.15, "color": 0.35, "material": 0.15, "shape": 0.35}


def _pick(rng: np.random.Generator, weights: dict[str, float], allowed: list[str] | None = None) -> str:
    names = [k for k in weights if allowed is None or k in allowed]
    p = np.array([weights[k] for k in names])
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def _value(rng: np.random.Generator, vocabulary: Vocabulary, attribute: str, avoid: tuple[str, ...] = ()) -> str:
    values = [v for v in vocabulary.values(attribute) if v not in avoid]
    return values[int(rng.integers(len(values)))]


def random_spec(
    rng: np.random.Generator, region: int, vocabulary: Vocabulary = CLEVR_POC, template: str | None = None
) -> ConstraintSpec:
    """One random instance of `template` (weighted random when None) about `region`."""
    name = template or _pick(rng, TEMPLATE_WEIGHTS)
    multi_valued = [a for a in ATTRIBUTES if len(vocabulary.values(a)) > 2]
    attribute = _pick(rng, ATTRIBUTE_WEIGHTS, multi_valued if name == "either_or" else None)
    p: dict = {"region": region, "attribute": attribute}
    if name in ("all_in_region", "none_in_region", "global_ban", "exactly_n", "at_least_n", "at_most_n"):
        p["value"] = _value(rng, vocabulary, attribute)
    if name == "global_ban":
        del p["region"]
    elif name == "either_or":
        p["value"] = _value(rng, vocabulary, attribute)
        p["value2"] = _value(rng, vocabulary, attribute, (p["value"],))
    elif name == "exactly_n":
        p["n"] = int(rng.integers(1, 3))
    elif name in ("at_least_n", "at_most_n"):
        p["n"] = 1
    elif name in ("at_least_pairs", "at_most_pairs"):
        p["region2"] = int(rng.integers(NUM_REGIONS))
        p["n"] = 1 if name == "at_least_pairs" else int(rng.integers(0, 2))
        if rng.random() < 0.3:
            p["attribute2"] = _pick(rng, ATTRIBUTE_WEIGHTS, [a for a in ATTRIBUTES if a != attribute])
            p["value2"] = _value(rng, vocabulary, p["attribute2"])
    elif name == "implication":
        p["value"] = _value(rng, vocabulary, attribute)
        p["attribute2"] = _pick(rng, ATTRIBUTE_WEIGHTS, [a for a in ATTRIBUTES if a != attribute])
        p["value2"] = _value(rng, vocabulary, p["attribute2"])
    return ConstraintSpec(name, p)


def environment_text(specs: list[ConstraintSpec], num_objects: int, title: str = "") -> str:
    """The `.lp` text: objects, then each constraint under its English sentence."""
    lines = [f"% {title}" if title else "% CLEVR-POC environment", f"object(0..{num_objects - 1}).", ""]
    for spec in specs:
        lines += [f"% {spec.sentence()}", spec.asp()]
    return "\n".join(lines) + "\n"


OCCUPIED = "clevr_game_occupied"  # reserved prefix: no environment can name it


def _satisfiable(
    specs: list[ConstraintSpec], num_objects: int, vocabulary: Vocabulary, *, every_region_usable: bool = False
) -> bool:
    """Some scene meets `specs`; with `every_region_usable`, for each region some scene has an object there."""
    if every_region_usable:
        return not empty_regions(specs, num_objects, vocabulary)  # an unsatisfiable list leaves every region empty
    control = new_control()
    control.add("base", [], background_program(vocabulary) + environment_text(specs, num_objects))
    control.ground([("base", [])])
    return bool(control.solve().satisfiable)


def empty_regions(specs: list[ConstraintSpec], num_objects: int, vocabulary: Vocabulary = CLEVR_POC) -> list[int]:
    """Regions that no scene meeting `specs` can put an object in."""
    control = new_control()
    control.add(
        "base", [],
        background_program(vocabulary) + environment_text(specs, num_objects) + f"{OCCUPIED}(R) :- at(_, R).",
    )
    control.ground([("base", [])])
    return [
        region for region in range(NUM_REGIONS)
        if not control.solve(assumptions=[(clingo.Function(OCCUPIED, [clingo.Number(region)]), True)]).satisfiable
    ]


def generate_environment(
    rng: np.random.Generator,
    num_objects: int,
    *,
    max_constraints: int = MAX_CONSTRAINTS,
    vocabulary: Vocabulary = CLEVR_POC,
    max_attempts: int = 400,
    allow_empty_regions: bool = False,
) -> list[ConstraintSpec]:
    """A satisfiable list of template instances with at least two per region.

    Unless `allow_empty_regions`, no region is forced empty: each can hold an
    object in some scene of the environment.
    """
    if not POC_MIN_OBJECTS <= num_objects <= POC_MAX_OBJECTS:
        raise InputError(f"--objects {num_objects}: an environment has {POC_MIN_OBJECTS} to {POC_MAX_OBJECTS} objects")
    if not NUM_REGIONS * MIN_PER_REGION <= max_constraints <= MAX_CONSTRAINTS:
        raise InputError(f"max constraints {max_constraints}: must lie in {NUM_REGIONS * MIN_PER_REGION}..{MAX_CONSTRAINTS}")
    target = int(rng.integers(NUM_REGIONS * MIN_PER_REGION + 2, max_constraints + 1))
    specs: list[ConstraintSpec] = []
    seen: set[str] = set()
    for _ in range(max_attempts):
        coverage = [sum(region in s.regions() for s in specs) for region in range(NUM_REGIONS)]
        short = [r for r in range(NUM_REGIONS) if coverage[r] < MIN_PER_REGION]
        if not short and len(specs) >= target:
            return specs
        region = short[int(rng.integers(len(short)))] if short else int(rng.integers(NUM_REGIONS))
        spec = random_spec(rng, region, vocabulary)
        if spec.template == "global_ban" and (short or any(s.template == "global_ban" for s in specs)):
            continue
        # Keep room for the regions that still lack their two constraints.
        deficit = sum(max(0, MIN_PER_REGION - coverage[r] - (r in spec.regions())) for r in range(NUM_REGIONS))
        text = spec.asp()
        if len(specs) + 1 + deficit > max_constraints or text in seen:
            continue
        seen.add(text)
        if _satisfiable([*specs, spec], num_objects, vocabulary, every_region_usable=not allow_empty_regions):
            specs.append(spec)
    raise ClevrGameError(f"no satisfiable environment of {num_objects} objects found in {max_attempts} attempts")
