"""The scene sampler: spread over the answer sets, reproducible, objects placed inside their regions."""

from __future__ import annotations

from collections import Counter

import clingo
import numpy as np

from clevr_game.asp import BACKGROUND, Environment, SceneSampler, regions_of
from clevr_game.layout import first_violation

FREE = "object(0..4).\n"
CONSTRAINED = (
    "object(0..5).\n"
    "% All objects in region 1 are cubes.\n:- object(X), at(X, 1), not hasProperty(X, shape, cube).\n"
    "% Region 0 holds exactly 1 red object.\n"
    ":- #count { X : object(X), at(X, 0), hasProperty(X, color, red) } != 1.\n"
)


def draws(text: str, seed: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    sampler = SceneSampler(Environment.from_text(text, "s.lp"), np.random.default_rng(seed))
    return [sampler.sample_assignment() for _ in range(count)]


def test_samples_are_spread_unlike_the_solvers_first_models() -> None:
    samples = draws(FREE, seed=0, count=120)
    distinct = {(ids.tobytes(), regions.tobytes()) for ids, regions in samples}
    assert len(distinct) >= 118
    colors = Counter(int(ids[0, 1]) for ids, _ in samples)  # object 0's colour: 8 values, ~15 each
    regions = Counter(int(r[0]) for _, r in samples)  # object 0's region: 4 values, ~30 each
    assert len(colors) == 8 and min(colors.values()) >= 4
    assert len(regions) == 4 and min(regions.values()) >= 15
    # Plain clingo returns the same first model every time: that is what the sampler avoids.
    firsts = set()
    for _ in range(3):
        control = clingo.Control()
        control.add("base", [], BACKGROUND + FREE)
        control.ground([("base", [])])
        control.solve(on_model=lambda m: firsts.add(str(sorted(map(str, m.symbols(atoms=True))))))
    assert len(firsts) == 1


def test_samples_satisfy_the_environment_and_still_vary() -> None:
    environment = Environment.from_text(CONSTRAINED, "c.lp")
    samples = draws(CONSTRAINED, seed=1, count=60)
    assert all(environment.check_ids(ids, regions).ok for ids, regions in samples)
    assert len({(ids.tobytes(), regions.tobytes()) for ids, regions in samples}) == 60
    shapes_in_1 = {int(ids[i, 3]) for ids, regions in samples for i in np.flatnonzero(regions == 1)}
    assert shapes_in_1 == {0}  # cubes only
    assert len({int(ids[i, 3]) for ids, regions in samples for i in np.flatnonzero(regions != 1)}) == 4


def test_same_seed_same_samples() -> None:
    first = draws(CONSTRAINED, seed=5, count=5)
    second = draws(CONSTRAINED, seed=5, count=5)
    other = draws(CONSTRAINED, seed=6, count=5)
    assert all((a[0] == b[0]).all() and (a[1] == b[1]).all() for a, b in zip(first, second, strict=True))
    assert any((a[0] != b[0]).any() or (a[1] != b[1]).any() for a, b in zip(first, other, strict=True))


def test_scenes_are_placed_inside_their_regions_under_clevr_rules() -> None:
    environment = Environment.from_text(CONSTRAINED, "c.lp")
    sampler = SceneSampler(environment, np.random.default_rng(3))
    for index in range(8):
        scene = sampler.sample_scene(image_index=index)
        assert len(scene) == 6 and environment.check(scene).ok
        declared = [o.extra["region"] for o in scene.objects]
        assert regions_of(scene.coords()).tolist() == declared
        assert first_violation(scene.coords(), scene.radii()) is None
        data = scene.to_json()
        assert data["vocabulary"] == "clevr-poc" and all("region" in o for o in data["objects"])
        assert data["relationships"] == scene.computed_relationships()
