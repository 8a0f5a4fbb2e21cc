"""The constraint checker against fresh clingo solving, on thousands of scenes, and its scene-level API."""

from __future__ import annotations

import numpy as np
import pytest
from test_asp_oracle import oracle_satisfied, oracle_violations

from clevr_game.asp import (
    Environment,
    SceneSampler,
    environment_text,
    generate_environment,
    regions_of,
)
from clevr_game.asp.sampling import build_scene
from clevr_game.errors import InputError
from clevr_game.scene import DEFAULT_DIRECTIONS
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC

VALUE_COUNTS = [len(CLEVR_POC.values(a)) for a in ATTRIBUTES]


def rows_of(ids: np.ndarray, regions: np.ndarray) -> list[tuple[str, str, str, str, int]]:
    return [
        (*(CLEVR_POC.values(a)[v] for a, v in zip(ATTRIBUTES, row, strict=True)), int(r))  # type: ignore[misc]
        for row, r in zip(ids.tolist(), regions.tolist(), strict=True)
    ]


def scenes_near_valid(environment: Environment, rng: np.random.Generator, valid: int, variants: int):
    """Sampled valid scenes and, for each, variants with one to three values or regions changed."""
    sampler = SceneSampler(environment, rng)
    all_ids, all_regions = [], []
    for _ in range(valid):
        ids, regions = sampler.sample_assignment()
        all_ids.append(ids)
        all_regions.append(regions)
        for _ in range(variants):
            new_ids, new_regions = ids.copy(), regions.copy()
            for _ in range(int(rng.integers(1, 4))):
                obj, slot = int(rng.integers(len(ids))), int(rng.integers(5))
                if slot == 4:
                    new_regions[obj] = rng.integers(4)
                else:
                    new_ids[obj, slot] = rng.integers(VALUE_COUNTS[slot])
            all_ids.append(new_ids)
            all_regions.append(new_regions)
    return np.array(all_ids), np.array(all_regions)


@pytest.fixture(scope="module")
def generated() -> list[tuple[Environment, str]]:
    rng = np.random.default_rng(2024)
    out = []
    for n in (6, 9):
        text = environment_text(generate_environment(rng, n), n)
        out.append((Environment.from_text(text, f"gen{n}.lp"), text))
    return out


def test_checker_matches_fresh_clingo_on_thousands_of_scenes(generated: list[tuple[Environment, str]]) -> None:
    rng = np.random.default_rng(7)
    checked = failures = 0
    for environment, text in generated:
        assert environment.check_method == "compiled"
        ids, regions = scenes_near_valid(environment, rng, valid=30, variants=24)
        compiled = environment.check_many(ids, regions)
        by_clingo = environment.check_many(ids, regions, method="clingo")
        assert compiled == by_clingo
        assert [environment.check_ids(i, r) for i, r in zip(ids, regions, strict=True)] == compiled
        assert environment.satisfied(ids, regions).tolist() == [r.ok for r in compiled]
        sentences = [c.sentence for c in environment.all_constraints]
        for b in range(len(ids)):
            expected = oracle_violations(text, rows_of(ids[b], regions[b]))
            assert compiled[b].failed == [sentences[k] for k in expected]
        for b in range(0, len(ids), 10):  # the plain hard-constraint program agrees too
            assert oracle_satisfied(text, rows_of(ids[b], regions[b])) == compiled[b].ok
        checked += len(ids)
        failures += sum(not r.ok for r in compiled)
    assert checked >= 1500
    assert 0.2 * checked < failures < 0.95 * checked  # both verdicts are well represented


def test_scene_check_reads_regions_from_coordinates() -> None:
    text = "object(0..1).\n% All objects in region 1 are cubes.\n:- object(X), at(X, 1), not hasProperty(X, shape, cube).\n"
    environment = Environment.from_text(text, "coords.lp")
    right = np.array(DEFAULT_DIRECTIONS["right"][:2])
    behind = np.array(DEFAULT_DIRECTIONS["behind"][:2])
    ids = np.array([[0, 1, 0, 1], [2, 2, 1, 0]])  # a small red rubber sphere, a large blue metal cube
    rng = np.random.default_rng(0)
    left_back = -1.5 * right + 1.5 * behind
    right_back = 1.5 * right + 1.5 * behind
    other = -1.5 * right - 1.5 * behind
    ok_scene = build_scene(ids, np.array([0, 2]), np.array([left_back, other]), rng, CLEVR_POC)
    assert regions_of(ok_scene.coords()).tolist() == [0, 2]
    assert environment.check(ok_scene).ok
    moved = ok_scene.with_coords(np.array([right_back, other]))
    assert environment.check(moved).failed == ["All objects in region 1 are cubes."]
    # An explicit region overrides the coordinates.
    assert environment.check(moved, regions=np.array([0, 2])).ok


def test_spatial_environment_is_checked_with_relations() -> None:
    text = (
        "object(0..1).\n% No red object is left of another object.\n"
        ":- object(X), object(Y), left(X, Y), hasProperty(X, color, red).\n"
    )
    environment = Environment.from_text(text, "spatial.lp")
    assert environment.check_method == "clingo"
    right = np.array(DEFAULT_DIRECTIONS["right"][:2])
    behind = np.array(DEFAULT_DIRECTIONS["behind"][:2])
    ids = np.array([[0, 1, 0, 1], [2, 2, 1, 0]])  # object 0 is red
    rng = np.random.default_rng(0)
    red_left = build_scene(ids, np.array([0, 1]), np.array([-1.5 * right + behind, 1.5 * right + behind]), rng, CLEVR_POC)
    red_right = red_left.with_coords(np.array([[*(1.5 * right - behind), 0.35], [*(-1.5 * right - behind), 0.7]]))
    assert environment.check(red_left).failed == ["No red object is left of another object."]
    assert environment.check(red_right).ok


def test_check_rejects_scenes_of_the_wrong_size(generated: list[tuple[Environment, str]]) -> None:
    environment, _ = generated[0]
    with pytest.raises(InputError, match="the scene has 3 objects, the environment 6"):
        environment.check_ids(np.zeros((3, 4), dtype=int), np.zeros(3, dtype=int))
    with pytest.raises(InputError, match="out of range"):
        environment.check_ids(np.full((6, 4), 9), np.zeros(6, dtype=int))
    with pytest.raises(InputError, match="region"):
        environment.check_ids(np.zeros((6, 4), dtype=int), np.full(6, 4))


FREE_FORM = """object(0..5).
% Objects in region 0 share their colour.
:- at(X, 0), at(Y, 0), X != Y, not same_color(X, Y).
% Nothing in region 1 may be right of a region-0 sphere.
:- at(X, 1), right_R(X, Y), at(Y, 0), hasProperty(Y, shape, sphere).
% Front-half cubes are large.
:- front_R(X, Y), at(X, 2), hasProperty(X, shape, cube), not hasProperty(X, size, large).
% At most two metal pairs share a shape.
:- #count { X, Y : sameProperty(X, Y, shape), hasProperty(X, material, metal), hasProperty(Y, material, metal) } > 4.
"""


def test_free_form_constraints_use_clingo_and_agree_with_the_oracle() -> None:
    environment = Environment.from_text(FREE_FORM, "free.lp")
    assert environment.check_method == "clingo"
    rng = np.random.default_rng(3)
    ids = np.stack([rng.integers(0, n, (300, 6)) for n in VALUE_COUNTS], axis=-1)
    ids[:, :, 1] = rng.integers(0, 2, (300, 6))  # two colours only, so region 0 often agrees
    regions = rng.integers(0, 4, (300, 6))
    sentences = [c.sentence for c in environment.all_constraints]
    results = environment.check_many(ids, regions)
    for b in range(len(ids)):
        expected = oracle_violations(FREE_FORM, rows_of(ids[b], regions[b]))
        assert results[b].failed == [sentences[k] for k in expected]
    assert 30 < sum(r.ok for r in results) < 270
