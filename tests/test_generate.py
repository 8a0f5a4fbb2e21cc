"""Scene generation: CLEVR's rules hold for every scene, and the seed decides everything."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clevr_game.errors import InputError
from clevr_game.generate import generate_scenes
from clevr_game.layout import (
    BOUND,
    MIN_GAP,
    MIN_MARGIN,
    first_violation,
    judge_batch,
    sample_layout,
    valid_batch,
)
from clevr_game.scene import DEFAULT_DIRECTIONS, project_to_pixels


def _check_rules(scene):
    xy, radii = scene.coords()[:, :2], scene.radii()
    assert np.all(np.abs(xy) < BOUND)
    left, front = np.array(DEFAULT_DIRECTIONS["left"][:2]), np.array(DEFAULT_DIRECTIONS["front"][:2])
    for i in range(len(scene)):
        for j in range(i + 1, len(scene)):
            d = xy[i] - xy[j]
            assert np.linalg.norm(d) - radii[i] - radii[j] >= MIN_GAP
            assert abs(d @ left) >= MIN_MARGIN and abs(d @ front) >= MIN_MARGIN


def test_generated_scenes_follow_clevr_rules():
    scenes = list(generate_scenes(200, seed=3))
    counts = {len(s) for s in scenes}
    assert min(counts) == 3 and max(counts) == 10
    for scene in scenes:
        _check_rules(scene)
        assert scene.relationships == scene.computed_relationships()
        for obj in scene.objects:
            assert obj.coords[2] == scene.vocabulary.radius(obj.size)
            assert 0.0 <= obj.rotation < 360.0
        np.testing.assert_allclose(
            [o.pixel_coords[:2] for o in scene.objects], project_to_pixels(scene.coords())[:, :2]
        )


def test_ten_object_scenes_are_always_possible():
    for scene in generate_scenes(50, seed=1, min_objects=10, max_objects=10):
        assert len(scene) == 10
        _check_rules(scene)


def test_same_seed_same_scenes_different_seed_different_scenes():
    def dump(seed):
        return json.dumps([s.to_json() for s in generate_scenes(20, seed=seed)])

    assert dump(5) == dump(5)
    assert dump(5) != dump(6)


def test_sampler_spreads_objects_over_the_board():
    rng = np.random.default_rng(0)
    firsts = np.array([sample_layout(np.array([0.35]), rng)[0] for _ in range(2000)])
    # Uniform over the square: each quadrant near a quarter, mean near the centre.
    quadrant_share = np.mean((firsts[:, 0] > 0) & (firsts[:, 1] > 0))
    assert 0.2 < quadrant_share < 0.3
    assert np.all(np.abs(firsts.mean(0)) < 0.2)


def test_zones_confine_objects():
    rng = np.random.default_rng(0)
    xy = sample_layout(np.array([0.7, 0.35, 0.35]), rng,
                       zones=lambda pool: np.stack([pool[:, 0] > 1, pool[:, 1] < -1, pool[:, 0] < -1]))
    assert xy[0, 0] > 1 and xy[1, 1] < -1 and xy[2, 0] < -1


@pytest.mark.parametrize(
    ("xy", "kind"),
    [
        ([[0.0, 0.0], [3.1, 0.0]], "bounds"),
        ([[0.0, 0.0], [0.5, 0.5]], "overlap"),
        # 2 apart along the left axis but only 0.1 along the front axis: a margin break.
        ([[0.0, 0.0], list(2.0 * np.array(DEFAULT_DIRECTIONS["left"][:2])
                            + 0.1 * np.array(DEFAULT_DIRECTIONS["front"][:2]))], "margin"),
    ],
)
def test_violations_are_found_and_named(xy, kind):
    xy, radii = np.array(xy), np.array([0.35, 0.35])
    violation = first_violation(xy, radii)
    assert violation is not None and violation.kind == kind
    assert "object" in violation.reason()
    assert not valid_batch(xy[None], radii[None], np.ones((1, 2), bool))[0]


def test_valid_batch_agrees_with_first_violation():
    rng = np.random.default_rng(2)
    xy = rng.uniform(-3.2, 3.2, (500, 4, 2))
    radii = rng.choice([0.35, 0.7], (500, 4))
    batch = valid_batch(xy, radii, np.ones((500, 4), bool))
    single = np.array([first_violation(x, r) is None for x, r in zip(xy, radii, strict=True)])
    np.testing.assert_array_equal(batch, single)
    assert 0 < batch.sum() < 500


def test_bad_object_counts_are_rejected():
    with pytest.raises(InputError, match="min-objects"):
        list(generate_scenes(1, seed=0, min_objects=5, max_objects=4))


def test_judge_batch_names_the_same_first_violation():
    rng = np.random.default_rng(9)
    xy = rng.uniform(-3.3, 3.3, (800, 5, 2))
    radii = rng.choice([0.35, 0.7], (800, 5))
    present = np.ones((800, 5), bool)
    present[::3, 4] = False
    verdict = judge_batch(xy, radii, present)
    for row in range(800):
        n = int(present[row].sum())
        assert verdict.violation(row) == first_violation(xy[row, :n], radii[row, :n])


def test_batch_reasons_read_as_the_single_ones():
    rng = np.random.default_rng(10)
    xy = rng.uniform(-3.3, 3.3, (300, 4, 2))
    radii = rng.choice([0.35, 0.7], (300, 4))
    verdict = judge_batch(xy, radii, np.ones((300, 4), bool))
    names = ["a", "b", "c", "d"]
    for row in range(300):
        single = first_violation(xy[row], radii[row])
        assert verdict.reason(row, names) == (single.reason(names) if single else "")


def test_generate_with_both_template_sets_asks_questions_of_each(tmp_path, clevr_templates_dir):
    from clevr_game.generate import generate_dataset
    from clevr_game.questions import default_templates

    generate_dataset(tmp_path, 40, 4, seed=1, templates="both", clevr_templates=clevr_templates_dir,
                     progress=False)
    questions = json.loads((tmp_path / "questions.json").read_text())["questions"]
    own = len(default_templates())
    families = {q["question_family_index"] for q in questions}
    assert any(f < own for f in families) and any(f >= own for f in families)
    assert all(q["answer"] is not None for q in questions)


def test_generate_with_clevr_templates_uses_the_shipped_copy(tmp_path, capsys):
    from clevr_game.cli import main
    from clevr_game.datafiles import CLEVR_TEMPLATE_DIR

    assert main(["generate", "--num-scenes", "2", "--questions-per-scene", "3", "--templates", "clevr",
                 "--out", str(tmp_path), "--no-progress"]) == 0
    questions = json.loads((tmp_path / "questions.json").read_text())["questions"]
    assert questions and {q["template_filename"] for q in questions} <= {p.name for p in CLEVR_TEMPLATE_DIR.glob("*.json")}
    assert len(list(CLEVR_TEMPLATE_DIR.glob("*.json"))) == 9
    assert sum(len(json.loads(p.read_text())) for p in CLEVR_TEMPLATE_DIR.glob("*.json")) == 90


def test_generate_with_a_missing_clevr_template_folder_is_one_line(tmp_path, capsys):
    from clevr_game.cli import main

    rc = main(["generate", "--num-scenes", "1", "--templates", "clevr", "--clevr-templates", str(tmp_path / "none"),
               "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and str(tmp_path / "none") in err and "\n" not in err
