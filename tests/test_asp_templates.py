"""Each of the eleven templates (and the two world rules) on hand-made scenes that satisfy and violate it."""

from __future__ import annotations

import numpy as np
import pytest
from test_asp_oracle import oracle_violations

from clevr_game.asp import TEMPLATES, ConstraintSpec, Environment, match_constraint
from clevr_game.errors import InputError
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC

Row = tuple[str, str, str, str, int]


def o(description: str, region: int) -> Row:
    size, color, material, shape = description.split()
    return (size, color, material, shape, region)


def environment_for(spec: ConstraintSpec | None, n: int) -> tuple[Environment, str]:
    body = f"% {spec.sentence()}\n{spec.asp()}\n" if spec else ""
    text = f"object(0..{n - 1}).\n{body}"
    return Environment.from_text(text, "hand.lp"), text


def ids_and_regions(rows: list[Row]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.array([[CLEVR_POC.index(a, row[k]) for k, a in enumerate(ATTRIBUTES)] for row in rows])
    return ids, np.array([row[4] for row in rows])


CASES: list[tuple[str, dict, list[Row], list[Row]]] = [
    ("all_in_region", dict(region=1, attribute="shape", value="cube"),
     [o("small red rubber cube", 1), o("large blue metal cube", 1), o("small green rubber sphere", 0)],
     [o("small red rubber cube", 1), o("large blue metal sphere", 1), o("small green rubber sphere", 0)]),
    ("none_in_region", dict(region=2, attribute="color", value="red"),
     [o("small red rubber cube", 1), o("small blue rubber cube", 2), o("large green metal cone", 2)],
     [o("small red rubber cube", 2), o("small blue rubber cube", 2), o("large green metal cone", 2)]),
    ("either_or", dict(region=0, attribute="color", value="red", value2="blue"),
     [o("small red rubber cube", 0), o("large blue metal cone", 0), o("small green rubber cube", 3)],
     [o("small red rubber cube", 0), o("large green metal cone", 0), o("small green rubber cube", 3)]),
    ("exactly_n", dict(region=3, attribute="material", value="metal", n=2),
     [o("small red metal cube", 3), o("large blue metal cone", 3), o("small green rubber cube", 3)],
     [o("small red metal cube", 3), o("large blue rubber cone", 3), o("small green rubber cube", 3)]),
    ("exactly_n", dict(region=3, attribute="material", value="metal", n=2),
     [o("small red metal cube", 3), o("large blue metal cone", 3), o("small green metal cube", 2)],
     [o("small red metal cube", 3), o("large blue metal cone", 3), o("small green metal cube", 3)]),
    ("at_least_n", dict(region=1, attribute="shape", value="cone", n=1),
     [o("small red metal cone", 1), o("large blue metal cube", 0)],
     [o("small red metal cone", 0), o("large blue metal cube", 1)]),
    ("at_most_n", dict(region=1, attribute="size", value="large", n=1),
     [o("large red metal cone", 1), o("small blue metal cube", 1), o("large blue metal cube", 0)],
     [o("large red metal cone", 1), o("small blue metal cube", 1), o("large blue metal cube", 1)]),
    ("at_least_pairs", dict(region=0, region2=2, attribute="color", n=1),
     [o("small red metal cone", 0), o("large red rubber cube", 2), o("large blue rubber cube", 2)],
     [o("small red metal cone", 0), o("large red rubber cube", 0), o("large blue rubber cube", 2)]),
    ("at_least_pairs", dict(region=0, region2=0, attribute="color", n=1, attribute2="shape", value2="cube"),
     [o("small red metal cube", 0), o("large red rubber cube", 0), o("large blue rubber cube", 2)],
     [o("small red metal cube", 0), o("large red rubber sphere", 0), o("large red rubber cube", 2)]),
    ("at_most_pairs", dict(region=1, region2=1, attribute="size", n=0),
     [o("small red metal cube", 1), o("large red rubber cube", 1), o("small blue rubber cube", 3)],
     [o("small red metal cube", 1), o("small blue rubber cube", 1), o("large blue rubber cube", 3)]),
    ("at_most_pairs", dict(region=1, region2=3, attribute="size", n=1, attribute2="material", value2="metal"),
     [o("small red metal cube", 1), o("small blue metal cube", 3), o("small green rubber cube", 3)],
     [o("small red metal cube", 1), o("small blue metal cube", 3), o("small green metal cube", 3)]),
    ("global_ban", dict(attribute="shape", value="cone"),
     [o("small red metal cube", 1), o("small blue metal sphere", 3)],
     [o("small red metal cube", 1), o("small blue metal cone", 3)]),
    ("implication", dict(region=2, attribute="color", value="red", attribute2="shape", value2="cube"),
     [o("small red metal cube", 2), o("small blue metal sphere", 2), o("small blue metal cube", 0)],
     [o("small red metal cube", 2), o("small blue metal cube", 2), o("small blue metal sphere", 0)]),
    ("same_in_region", dict(region=0, attribute="material"),
     [o("small red rubber cube", 0), o("large blue rubber sphere", 0), o("small blue metal cube", 1)],
     [o("small red rubber cube", 0), o("large blue metal sphere", 0), o("small blue metal cube", 1)]),
]


def test_there_are_eleven_templates_and_every_one_is_exercised() -> None:
    assert len(TEMPLATES) == 11
    assert {name for name, *_ in CASES} == set(TEMPLATES)


@pytest.mark.parametrize(("name", "params", "satisfying", "violating"), CASES, ids=[c[0] for c in CASES])
def test_template_on_hand_made_scenes(name: str, params: dict, satisfying: list[Row], violating: list[Row]) -> None:
    spec = ConstraintSpec(name, params)
    assert match_constraint(spec.asp()) == spec  # the canonical text parses back
    environment, text = environment_for(spec, len(satisfying))
    assert environment.check_method == "compiled"
    for rows, ok in ((satisfying, True), (violating, False)):
        ids, regions = ids_and_regions(rows)
        for method in ("compiled", "clingo"):
            result = environment.check_ids(ids, regions, method=method)
            assert result.ok is ok, (method, rows)
            assert result.failed == ([] if ok else [spec.sentence()])
        assert oracle_violations(text, rows) == ([] if ok else [2])


def test_world_rules_name_twins_and_crowded_regions() -> None:
    environment, _ = environment_for(None, 4)
    twins = [o("small red rubber cube", 0), o("small red rubber cube", 1), o("large red rubber cube", 1), o("small red metal cube", 2)]
    crowded = [o("small red rubber cube", 0), o("small blue rubber cube", 0), o("large red rubber cube", 0), o("small red metal cube", 0)]
    for method in ("compiled", "clingo"):
        assert environment.check_ids(*ids_and_regions(twins), method=method).failed == [
            "No two objects are identical in all four attributes."]
        assert environment.check_ids(*ids_and_regions(crowded), method=method).failed == [
            "No region holds more than 3 objects."]


def test_english_sentences_read_naturally() -> None:
    sentences = {name: ConstraintSpec(name, params).sentence() for name, params, *_ in CASES}
    assert sentences["all_in_region"] == "All objects in region 1 are cubes."
    assert sentences["none_in_region"] == "No object in region 2 is red."
    assert sentences["either_or"] == "Every object in region 0 is red or blue."
    assert sentences["global_ban"] == "No object in the scene is a cone."
    assert sentences["implication"] == "Every cube in region 2 is red."
    assert ConstraintSpec("at_most_pairs", dict(region=1, region2=1, attribute="size", n=0)).sentence() == (
        "No pair of objects in region 1 has the same size.")


def test_non_canonical_constraint_falls_back_to_clingo_with_its_comment() -> None:
    text = "object(0..2).\n% Nothing in region 3 is metal.\n:- at(Y, 3), hasProperty(Y, material, metal).\n"
    environment = Environment.from_text(text, "odd.lp")
    assert environment.check_method == "clingo"
    rows = [o("small red metal cube", 3), o("small red rubber cube", 3), o("large red rubber cube", 0)]
    assert environment.check_ids(*ids_and_regions(rows)).failed == ["Nothing in region 3 is metal."]
    with pytest.raises(InputError, match="template form"):
        environment.check_ids(*ids_and_regions(rows), method="compiled")
