"""`clevr-game generate --templates clevr` draws questions from CLEVR's own generator's distribution (issue 67).

The reference is results/question-distribution/official.json: CLEVR's `generate_questions.py`
on the 500 real val scenes, 10 questions each, seed 0. The same command here (`--seed 0`,
5,000 questions; 3 s of one core to generate, about 8 s for this module) must match it.

Noise, relative, 1 sd. "Difference": of two runs on these scenes, sqrt(2) x the seed-to-seed
spread of this generator over 20 seeds (results/question-distribution/seed-spread.json);
"bootstrap": the standard error over scenes in official.json / project-after.json, which
also counts the scenes' own variation.

| statistic                          | tolerance       | difference | bootstrap (official / ours) |
|------------------------------------|-----------------|------------|-----------------------------|
| filters per question               | 3%              | 0.5%       | 1.6% / 0.6%                 |
| filters per question, per family   | 3.0% to 5.2%    | 0.8-2.6%   | 1.3-1.9% / 0.9-1.9%         |
| program length                     | 3%              | 0.2%       | 1.4% / 0.5%                 |
| program length, per family         | 3%              | 0.3-1.2%   | 0.6-1.3% / 0.4-1.3%         |
| mean answer of count questions     | 8%              | 3.3%       | 3.5% / 3.1%                 |
| the same, per family (7 count)     | 8% to 41%       | 3.7-20%    | 3.6-20% / 3.7-21%           |
| words per question                 | 3%              | 0.3%       | 1.1% / 0.5%                 |
| answers: total variation distance  | < 0.03          | 20 seeds: 0.016 +- 0.003 from official.json, whose own seed 1 is 0.012 from it |
| family shares                      | +- 0.01         | a round robin: under 0.002 here                          |

Each tolerance is the issue's (3%; 8% for count means) or twice the noise of the
difference, whichever is larger: the per-family filter counts of six families
(compare_integer 3.5%, one_hop 4.7%, single_and 3.1%, three_hop 3.9%, two_hop 4.0%,
zero_hop 5.2%) vary between runs more than 3% allows (seeds 0 to 19: 9 pass every 3%
check, 18 these), and a family's count mean rests on 56 to 453 questions. This run's largest
gaps: zero_hop filters +3.6%, compare_integer +2.2%, one_hop +2.0%; two_hop's count
mean -30% (tolerance 37%). The former sampling missed every family's filters by 33 to 45%.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from clevr_game.cli import main
from clevr_game.datafiles import CLEVR_VAL_SCENES
from clevr_game.generate import generate_dataset
from clevr_game.programs.program import parse_program
from clevr_game.programs.reference import INVALID_ANSWER, reference_execute, reference_trace
from clevr_game.questions import (
    GenerationFacts,
    QuestionGenerator,
    Rejected,
    check_instance,
    default_sampling,
    load_templates,
)
from clevr_game.questions.balance import RATIO
from clevr_game.questions.clevr_search import ClevrSearch
from clevr_game.questions.evaluate import is_degenerate
from clevr_game.questions.generator import CLEVR_RESET_EVERY
from clevr_game.questions.search import make_plan
from clevr_game.questions.text import clevr_drops_other
from clevr_game.scene import Scene, load_scenes
from clevr_game.vocab import CLEVR
from experiments.question_distribution import measure, total_variation

RESULTS = Path(__file__).resolve().parents[1] / "results" / "question-distribution"
FAMILIES = ("compare_integer", "comparison", "one_hop", "same_relate", "single_and", "single_or",
            "three_hop", "two_hop", "zero_hop")
ISSUE_TOLERANCE = {"filters_per_question": 0.03, "program_length": 0.03, "count_answer_mean": 0.08,
                   "words_per_question": 0.03}
MAX_ANSWER_DISTANCE = 0.03
MAX_FAMILY_SHARE_GAP = 0.01
MINIMAL_SHA256 = "f096ebf7be2274ce904537083d5070b8eca6449a049abb92e87e75e73df8003a"
"""questions.json of `--templates clevr --seed 0` on the 500 scenes before issue 67 (README)."""


def _statistics(name: str) -> dict[str, float]:
    data = json.loads((RESULTS / name).read_text())
    return {k: v["value"] if isinstance(v, dict) and "value" in v else v["mean"] for k, v in data["statistics"].items()}


OFFICIAL = _statistics("official.json")
SPREAD = json.loads((RESULTS / "seed-spread.json").read_text())["statistics"]


def checked_statistics() -> list[str]:
    names = []
    for base in ("filters_per_question", "program_length", "count_answer_mean"):
        names += [base] + [name for name in OFFICIAL if name.startswith(f"{base}/")]
    return names + ["words_per_question"]


def tolerance(name: str) -> float:
    """The issue's relative tolerance, or twice the noise of a difference between two runs when larger."""
    noise = math.sqrt(2) * SPREAD[name]["sd"] / SPREAD[name]["mean"]
    return max(ISSUE_TOLERANCE[name.split("/")[0]], 2 * noise)


def misses(values: dict[str, float]) -> list[str]:
    """The checked statistics of `values` outside their tolerance of CLEVR's."""
    out = []
    for name in checked_statistics():
        gap = values[name] / OFFICIAL[name] - 1
        if abs(gap) > tolerance(name):
            out.append(f"{name}: {values[name]:.4f} against CLEVR's {OFFICIAL[name]:.4f} ({gap:+.1%}, "
                       f"tolerance {tolerance(name):.1%})")
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`clevr-game generate --templates clevr --seed 0` on the 500 real val scenes."""
    out = tmp_path_factory.mktemp("clevr-sampling")
    assert main(["generate", "--scenes", str(CLEVR_VAL_SCENES), "--questions-per-scene", "10", "--templates", "clevr",
                 "--seed", "0", "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture(scope="module")
def values(run: Path) -> dict[str, float]:
    return measure(CLEVR_VAL_SCENES, run / "questions.json").values()


@pytest.fixture(scope="module")
def scenes() -> list[Scene]:
    return load_scenes(CLEVR_VAL_SCENES)


@pytest.fixture(scope="module")
def clevr_templates(clevr_templates_dir: Path) -> list:
    return load_templates(clevr_templates_dir)


# ---------------------------------------------------------------- the distribution


def test_statistics_match_clevrs_generator(values: dict[str, float]) -> None:
    assert values["questions_per_scene"] == 10
    assert {name.split("/")[1] for name in values if name.startswith("family_share/")} == set(FAMILIES)
    assert misses(values) == []


def test_the_former_sampling_fails_the_same_check() -> None:
    """The tolerances tell the two samplings apart: the former misses every filter count."""
    missed = misses(_statistics("project-before.json"))
    assert all(any(m.startswith(f"filters_per_question/{family}:") for m in missed) for family in FAMILIES)


def test_answers_and_families_are_distributed_alike(values: dict[str, float]) -> None:
    def answers(statistics: dict[str, float]) -> dict[str, float]:
        return {k.split("/", 1)[1]: v for k, v in statistics.items() if k.startswith("answer_share/")}

    assert total_variation(answers(values), answers(OFFICIAL)) < MAX_ANSWER_DISTANCE
    for family in FAMILIES:
        name = f"family_share/{family}"
        assert abs(values[name] - OFFICIAL[name]) < MAX_FAMILY_SHARE_GAP, name


def test_project_after_json_is_this_run(values: dict[str, float]) -> None:
    after = _statistics("project-after.json")
    assert after.keys() == values.keys()
    assert all(after[k] == pytest.approx(values[k], abs=1e-6) for k in after)


def test_equal_counts_can_only_be_denied(run: Path, clevr_templates) -> None:
    """OUT_NEQ compares the two counts themselves, so "are there an equal number ..." answers no."""
    assert clevr_templates[0].nodes[-1].function == "equal_integer"  # compare_integer.json, template 0
    questions = json.loads((run / "questions.json").read_text())["questions"]
    equal = [q for q in questions if q["question_family_index"] == 0]
    assert {q["answer"] for q in equal} == {"no"}
    assert len(equal) == 500 // CLEVR_RESET_EVERY  # one a balancing period: "yes" never comes


def test_no_answer_dominates_a_template_within_a_balancing_period(run: Path) -> None:
    questions = json.loads((run / "questions.json").read_text())["questions"]
    counts: dict[tuple[int, int], Counter] = {}
    for q in questions:
        counts.setdefault((q["image_index"] // CLEVR_RESET_EVERY, q["question_family_index"]), Counter())[q["answer"]] += 1
    for answers in counts.values():
        top, second = (sorted(answers.values(), reverse=True) + [0])[:2]
        assert top <= RATIO * second + 1, answers


# ---------------------------------------------------------------- exact answers


def test_stored_answers_are_the_executed_answers(run: Path, scenes: list[Scene], capsys) -> None:
    by_index = {scene.image_index: scene.to_json() for scene in scenes}
    questions = json.loads((run / "questions.json").read_text())["questions"]
    assert len(questions) == 5000
    for q in questions:
        program = parse_program(q["program"])
        scene = by_index[q["image_index"]]
        assert reference_execute(program, scene) == q["answer"], q["question"]
        trace = reference_trace(program, scene)
        assert not any(isinstance(t, str) and t == INVALID_ANSWER for t in trace)
        assert all(len(trace[n.inputs[0]]) == 1 for n in program if n.function == "unique")
    capsys.readouterr()
    assert main(["answer", "--scenes", str(run / "scenes.json"), "--questions", str(run / "questions.json")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "accuracy: 5000/5000"


def test_every_question_keeps_clevrs_rules_but_not_the_minimal_ones(scenes, clevr_templates) -> None:
    generator = QuestionGenerator(clevr_templates, seed=1, sampling="clevr")
    redundant = 0
    instances = [(scene, q) for scene in scenes[:60] for q in generator.generate_instances(scene, 10)]
    assert len(instances) == 600
    for scene, instance in instances:
        facts = GenerationFacts(scene, CLEVR)
        assert instance.sampling == "clevr"
        assert check_instance(instance.template, facts, instance.values, sampling="clevr") == instance.answer
        assert all(instance.values[name] is None for name in instance.template.null_params)
        try:
            check_instance(instance.template, facts, instance.values)
        except Rejected:
            redundant += 1
    assert redundant > len(instances) // 2  # CLEVR names attributes it does not need, and more


def test_quick_degeneracy_test_is_clevrs(scenes, clevr_templates) -> None:
    """The search judges degeneracy per option; evaluate.is_degenerate reruns the whole program."""
    seen = Counter()

    class Checked(ClevrSearch):
        def _degeneracy(self, i, step, outputs, values):
            quick = super()._degeneracy(i, step, outputs, values)

            def both(option, answer):
                verdict = quick(option, answer)
                chosen = self._assign(step, option, values)
                assert verdict == is_degenerate(self.plan.template, self.facts, chosen, answer, "clevr")
                seen[verdict] += 1
                return verdict

            return both

    rng = np.random.default_rng(0)
    plans = [make_plan(t) for t in clevr_templates if t.family == "single_and"]
    for scene in scenes[:12]:
        facts = GenerationFacts(scene, CLEVR)
        for plan in plans:
            Checked(plan, facts, rng, lambda answer: rng.random() < 0.5).run()
    assert seen[True] > 100 and seen[False] > 10


# ---------------------------------------------------------------- how options are drawn


def test_option_sets_follow_clevrs_counts(scenes, clevr_templates) -> None:
    scene = scenes[0]
    facts = GenerationFacts(scene, CLEVR)
    table = facts.table
    described = set()
    for obj in scene.objects:
        own = (obj.size, obj.color, obj.material, obj.shape)
        for mask in range(16):
            described.add(table.index[tuple(v if mask >> j & 1 else None for j, v in enumerate(own))])
    assert set(facts.scene_keys) == described  # CLEVR's options: each object's 16 masked descriptions
    plans = {(t.family, t.index_in_file): make_plan(t) for t in clevr_templates}
    search = ClevrSearch(plans["zero_hop", 1], facts, np.random.default_rng(0), None)
    exist, count = plans["zero_hop", 1].steps[1], plans["zero_hop", 0].steps[1]
    assert search.options(exist, [facts.all]).draws == len(described)
    singles = sum(1 for k in described if facts.key_masks[k].bit_count() == 1)
    assert search.options(count, [facts.all]).draws == singles
    relate = plans["one_hop", 0].steps[2]  # relate_filter_count, no NULL params
    options = search.options(relate, [facts.all, 0])
    assert options.trivial and options.keep == round(len(options.fixed) * 0.1 / 0.9)


def test_other_is_dropped_by_clevrs_heuristic() -> None:
    kinds = {"<Z>": "size", "<C>": "color", "<M>": "material", "<S>": "shape"}
    params = kinds | {f"{name[:-1]}2>": kind for name, kind in kinds.items()}
    empty = dict.fromkeys(params)
    assert not clevr_drops_other(params, empty)  # both shapes read "thing"
    assert clevr_drops_other(params, {**empty, "<S2>": "cube"})  # "thing" against "cube"
    assert not clevr_drops_other(params, {**empty, "<C>": "red"})  # one side empty
    assert not clevr_drops_other(params, {**empty, "<C>": "red", "<C2>": "red"})
    assert not clevr_drops_other(params | {"<R>": "relation"}, {**empty, "<S2>": "cube", "<R>": "left"})


def test_same_seed_same_questions(scenes, clevr_templates) -> None:
    def questions(seed: int) -> str:
        generator = QuestionGenerator(clevr_templates, seed=seed, sampling="clevr")
        return json.dumps([generator.generate(scene, 6) for scene in scenes[:20]])

    assert questions(3) == questions(3)
    assert questions(3) != questions(4)


# ---------------------------------------------------------------- choosing a sampling


def test_minimal_sampling_is_the_former_generator(tmp_path: Path) -> None:
    generate_dataset(tmp_path, 0, 10, 0, templates="clevr", scenes_file=CLEVR_VAL_SCENES, sampling="minimal",
                     progress=False)
    assert hashlib.sha256((tmp_path / "questions.json").read_bytes()).hexdigest() == MINIMAL_SHA256


def test_defaults_and_help(capsys) -> None:
    assert default_sampling("clevr") == default_sampling("both") == "clevr"
    assert default_sampling(None) == default_sampling("own") == default_sampling("my/templates") == "minimal"
    with pytest.raises(ValueError, match="sampling 'uniform': expected one of clevr, minimal"):
        QuestionGenerator(sampling="uniform")
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--sampling {clevr,minimal}" in text
    assert "clevr: as CLEVR's own generator draws them" in text and "minimal: descriptions name only" in text
