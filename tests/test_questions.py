"""Question generation from templates, on real CLEVR scenes, checked against the reference executor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from clevr_game.datafiles import CLEVR_SYNONYMS
from clevr_game.errors import InputError
from clevr_game.programs.program import parse_program, program_to_json
from clevr_game.programs.reference import INVALID_ANSWER, reference_execute, reference_trace
from clevr_game.questions import (
    GenerationFacts,
    QuestionGenerator,
    Rejected,
    check_instance,
    default_templates,
    expand_program,
    load_templates,
)
from clevr_game.questions.balance import RATIO
from clevr_game.questions.search import Search, make_plan
from clevr_game.questions.text import realise, tidy
from clevr_game.scene import Scene, SceneObject, load_scenes, parse_scene
from clevr_game.vocab import CLEVR, CLEVR_POC, RELATIONS

REPO = Path(__file__).resolve().parents[1]

FAMILIES = {
    "zero_hop", "one_hop", "two_hop", "three_hop", "single_and", "single_or",
    "same_relate", "comparison", "compare_integer",
}
QUESTION_KEYS = {
    "question", "program", "answer", "question_family_index", "template_filename",
    "image_index", "image_filename", "split",
}


@pytest.fixture(scope="module")
def scenes(clevr_real: Path) -> list[Scene]:
    return load_scenes(clevr_real / "CLEVR_val_scenes_500.json")


@pytest.fixture(scope="module")
def own_run(scenes: list[Scene]) -> tuple[QuestionGenerator, list]:
    """The project's templates over 200 real scenes, 10 questions each."""
    generator = QuestionGenerator(seed=3)
    instances = [(scene, q) for scene in scenes[:200] for q in generator.generate_instances(scene, 10)]
    return generator, instances


@pytest.fixture(scope="module")
def clevr_run(scenes: list[Scene], clevr_templates_dir: Path) -> tuple[QuestionGenerator, list]:
    """CLEVR's own 90 templates and synonyms over 120 real scenes."""
    generator = QuestionGenerator(
        load_templates(clevr_templates_dir), synonyms=CLEVR_SYNONYMS, seed=5
    )
    instances = [(scene, q) for scene in scenes[:120] for q in generator.generate_instances(scene, 10)]
    return generator, instances


def assert_sound(scene: Scene, instance) -> None:
    """The answer is the reference answer of the expanded program; every unique sees one object."""
    scene_json = scene.to_json()
    assert reference_execute(instance.program, scene_json) == instance.answer
    trace = reference_trace(instance.program, scene_json)
    for node, output in zip(instance.program, trace, strict=True):
        assert not (isinstance(output, str) and output == INVALID_ANSWER)
        if node.function == "unique":
            assert len(trace[node.inputs[0]]) == 1, instance.text
    # The same rules, judged again from the finished assignment by the independent checker.
    assert check_instance(instance.template, GenerationFacts(scene, CLEVR), instance.values) == instance.answer


# ---------------------------------------------------------------- templates


def test_default_templates_cover_nine_families_with_several_each() -> None:
    templates = default_templates()
    per_family = Counter(t.family for t in templates)
    assert set(per_family) == FAMILIES
    assert min(per_family.values()) >= 5
    assert [t.family_index for t in templates] == list(range(len(templates)))
    filenames = [t.filename for t in templates]
    assert filenames == sorted(filenames)  # listing order: by file name, then in-file order


def test_clevr_templates_all_load_in_listing_order(clevr_templates_dir: Path) -> None:
    templates = load_templates(clevr_templates_dir)
    assert len(templates) == 90
    assert Counter(t.family for t in templates)["same_relate"] == 28
    assert templates[0].filename == "compare_integer.json" and templates[-1].filename == "zero_hop.json"
    single = load_templates(clevr_templates_dir / "zero_hop.json")
    assert [t.family_index for t in single] == list(range(6))


# ---------------------------------------------------------------- generation


def test_every_family_yields_sound_questions_on_real_scenes(own_run) -> None:
    generator, instances = own_run
    assert Counter(q.template.family for _, q in instances).keys() == FAMILIES
    assert len(instances) >= 1900  # nearly every real scene supports 10 distinct questions
    for scene, instance in instances:
        assert_sound(scene, instance)


def test_question_dicts_are_clevr_questions(own_run, scenes: list[Scene]) -> None:
    generator = QuestionGenerator(seed=11)
    questions = generator.generate(scenes[7], 6)
    assert 0 < len(questions) <= 6
    for q in questions:
        assert set(q) == QUESTION_KEYS
        assert q["image_index"] == 7 and q["image_filename"] == "CLEVR_val_000007.png" and q["split"] == "val"
        template = generator.templates[q["question_family_index"]]
        assert q["template_filename"] == template.filename
        assert isinstance(q["answer"], str)
        # The program is the primitive form: it reads back and answers the same.
        program = parse_program(q["program"])
        assert program_to_json(program) == q["program"]
        assert all(set(node) == {"function", "inputs", "value_inputs"} for node in q["program"])
        assert reference_execute(program, scenes[7].to_json()) == q["answer"]
    assert len({json.dumps(q["program"]) for q in questions}) == len(questions)  # distinct on one scene
    assert generator.generate(scenes[7], 0) == []


def test_clevr_templates_generate_sound_questions_from_every_template(clevr_run) -> None:
    generator, instances = clevr_run
    assert {q.template.family_index for _, q in instances} == set(range(90))
    for scene, instance in instances:
        assert_sound(scene, instance)


def test_same_seed_same_questions_and_other_seed_others(scenes: list[Scene]) -> None:
    def run(seed: int) -> str:
        generator = QuestionGenerator(seed=seed)
        return json.dumps([generator.generate(scene, 5) for scene in scenes[:15]])

    assert run(42) == run(42)
    assert run(42) != run(43)


def test_questions_do_not_depend_on_the_hash_seed(clevr_real: Path) -> None:
    """Same seed and scenes give the same questions in another process, whatever PYTHONHASHSEED is."""
    script = (
        "import json, sys\n"
        "from clevr_game.questions import QuestionGenerator\n"
        "from clevr_game.scene import load_scenes\n"
        "generator = QuestionGenerator(seed=7)\n"
        "print(json.dumps([generator.generate(s, 4) for s in load_scenes(sys.argv[1])[:8]]))\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script, str(clevr_real / "CLEVR_val_scenes_sample11.json")],
            env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)},
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout
        for hash_seed in ("1", "2")
    ]
    assert len(json.loads(runs[0])) == 8
    assert runs[0] == runs[1]


def test_tiny_scenes_give_distinct_sound_questions() -> None:
    lonely = Scene([SceneObject("small", "red", "rubber", "cube", (0.0, 0.0, 0.35))], image_index=0)
    generator = QuestionGenerator(seed=0)
    for scene in (Scene([], image_index=1), lonely):
        instances = generator.generate_instances(scene, 10)
        assert instances  # "how many things", "is there a thing", ... still make sense
        assert len({q.program for q in instances}) == len(instances)
        for instance in instances:
            assert_sound(scene, instance)


def test_clevr_poc_vocabulary_adds_cones_and_medium_sizes(scenes: list[Scene]) -> None:
    poc_scenes = []
    for scene in scenes[:40]:
        data = scene.to_json()
        for i, obj in enumerate(data["objects"]):
            obj["shape"] = "cone" if i % 3 == 0 else obj["shape"]
            obj["size"] = "medium" if i % 4 == 1 else obj["size"]
        poc_scenes.append(parse_scene({**data, "vocabulary": "clevr-poc"}))
    generator = QuestionGenerator(vocabulary=CLEVR_POC, seed=0)
    answers = Counter()
    for scene in poc_scenes:
        facts = GenerationFacts(scene, CLEVR_POC)
        for q in generator.generate_instances(scene, 8):
            assert reference_execute(q.program, scene.to_json()) == q.answer
            assert check_instance(q.template, facts, q.values) == q.answer
            answers[q.answer] += 1
    assert answers["cone"] > 0 and answers["medium"] > 0


def test_scene_outside_the_vocabulary_is_an_input_error() -> None:
    cone = SceneObject("small", "red", "rubber", "cone", (0.0, 0.0, 0.35))
    with pytest.raises(InputError, match="object 0 has shape 'cone'"):
        QuestionGenerator(seed=0).generate(Scene([cone], image_index=4), 3)


# ---------------------------------------------------------------- rules


def _count_template():
    return next(t for t in default_templates() if t.family == "zero_hop" and t.answer_type == "integer")


def test_search_offers_exactly_the_filters_the_checker_accepts(scenes: list[Scene]) -> None:
    """Two implementations of "no redundant filter value": the bulk one the search uses, the per-key checker."""
    template = _count_template()
    names = template.nodes[1].value_inputs
    for scene in scenes[:5]:
        facts = GenerationFacts(scene, CLEVR)
        offered = {k for k, _ in facts.filter_options(facts.all, 0b1111, False, True)}
        accepted = set()
        for k, key in enumerate(facts.table.keys):
            try:
                check_instance(template, facts, dict(zip(names, key, strict=True)))
            except Rejected:
                continue
            accepted.add(k)
        assert offered == accepted
        assert 0 < len(accepted) < len(facts.table.keys)


def test_search_offers_exactly_the_relations_and_filters_the_checker_accepts(
    clevr_templates_dir: Path, scenes: list[Scene]
) -> None:
    template = load_templates(clevr_templates_dir / "one_hop.json")[0]  # filter_unique, relate_filter_count
    plan = make_plan(template)
    anchor_names = template.nodes[1].value_inputs
    relation_name, *names = template.nodes[2].value_inputs
    for scene in scenes[:3]:
        facts = GenerationFacts(scene, CLEVR)
        search = Search(plan, facts, np.random.default_rng(0), None)
        anchor_key, anchor_set = facts.filter_options(facts.all, 0b1111, True, True)[0]
        offered = {(r, k) for r, k, _, _ in search.options(plan.steps[2], [facts.all, anchor_set.bit_length() - 1])}
        anchor_values = dict(zip(anchor_names, facts.table.keys[anchor_key], strict=True))
        accepted = set()
        for relation in RELATIONS:
            for k, key in enumerate(facts.table.keys):
                values = {**anchor_values, relation_name: relation, **dict(zip(names, key, strict=True))}
                try:
                    check_instance(template, facts, values)
                except Rejected:
                    continue
                accepted.add((relation, k))
        assert offered == accepted
        assert offered


def test_checker_rejects_a_redundant_value_and_a_non_unique_reference(scenes: list[Scene]) -> None:
    template = next(t for t in default_templates() if t.family == "zero_hop" and t.answer_type == "shape")
    scene = scenes[0]
    facts = GenerationFacts(scene, CLEVR)
    names = template.nodes[1].value_inputs  # size, color, material, shape (shape is NULL here)
    colors = Counter(o.color for o in scene.objects)
    single = next(o for o in scene.objects if colors[o.color] == 1)
    assert check_instance(template, facts, dict(zip(names, (None, single.color, None, None), strict=True))) == single.shape
    with pytest.raises(Rejected, match="redundant"):  # its color alone already names it
        check_instance(template, facts, dict(zip(names, (single.size, single.color, None, None), strict=True)))
    shared = next(c for c, n in colors.items() if n > 1)
    with pytest.raises(Rejected, match="fails"):
        check_instance(template, facts, dict(zip(names, (None, shared, None, None), strict=True)))


NEQ_TEMPLATE = {
    "text": ["Are there as many <C> things as <C2> things?"],
    "nodes": [{"type": "scene", "inputs": []},
              {"type": "filter_count", "inputs": [0], "side_inputs": ["<Z>", "<C>", "<M>", "<S>"]},
              {"type": "scene", "inputs": []},
              {"type": "filter_count", "inputs": [2], "side_inputs": ["<Z2>", "<C2>", "<M2>", "<S2>"]},
              {"type": "equal_integer", "inputs": [1, 3]}],
    "params": [{"type": t, "name": f"<{n}{i}>"} for i in ("", "2")
               for t, n in (("Size", "Z"), ("Color", "C"), ("Material", "M"), ("Shape", "S"))],
    "constraints": [{"type": "NEQ", "params": ["<C>", "<C2>"]}, {"type": "NULL", "params": ["<S>"]},
                    {"type": "OUT_NEQ", "params": [1, 3]}],
}


def test_constraints_null_neq_out_neq_are_enforced(tmp_path: Path, scenes: list[Scene]) -> None:
    path = tmp_path / "neq.json"
    path.write_text(json.dumps([NEQ_TEMPLATE]))
    template = load_templates(path)[0]
    scene = scenes[1]
    facts = GenerationFacts(scene, CLEVR)
    colors = sorted({o.color for o in scene.objects})
    base = dict.fromkeys(template.params)
    check_instance(template, facts, {**base, "<C>": colors[0], "<C2>": colors[1]})
    with pytest.raises(Rejected, match="NEQ"):
        check_instance(template, facts, {**base, "<C>": colors[0], "<C2>": colors[0], "<M2>": "metal"})
    with pytest.raises(Rejected, match="NULL"):
        check_instance(template, facts, {**base, "<C>": colors[0], "<S>": "cube", "<C2>": colors[1]})
    size = scene.objects[0].size  # both sides "the <size> things": the same set, so OUT_NEQ refuses
    with pytest.raises(Rejected, match="OUT_NEQ"):
        check_instance(template, facts, {**base, "<Z>": size, "<Z2>": size})
    generator = QuestionGenerator([template], seed=0)
    instances = [q for s in scenes[:40] for q in generator.generate_instances(s, 3)]
    assert len(instances) > 40
    for instance in instances:
        assert instance.values["<S>"] is None
        assert instance.values["<C>"] is None or instance.values["<C>"] != instance.values["<C2>"]


def test_checker_rejects_empty_or_unknown_values_of_primitive_side_inputs(
    clevr_templates_dir: Path, scenes: list[Scene]
) -> None:
    facts = GenerationFacts(scenes[0], CLEVR)
    single_or = load_templates(clevr_templates_dir / "single_or.json")
    with_filter_size = single_or[1]  # union, then a template filter_size <Z3>
    values = dict.fromkeys(with_filter_size.params)
    with pytest.raises(Rejected, match="<Z3> of filter_size is empty"):
        check_instance(with_filter_size, facts, values)
    with pytest.raises(Rejected, match="not a size"):
        check_instance(with_filter_size, facts, {**values, "<Z3>": "huge"})


def test_expansion_reproduces_real_clevr_programs(clevr_real: Path, clevr_templates_dir: Path) -> None:
    """Real val questions about scene 0, with the CLEVR template each came from and its params read off."""
    real = json.loads((clevr_real / "CLEVR_val_questions_sample9.json").read_text())["questions"]
    cases = [
        (0, "same_relate.json", 3, {"<Z>": "large", "<M>": "metal"}),
        (3, "one_hop.json", 1, {"<Z>": "small", "<C>": "gray", "<S>": "cube", "<R>": "left", "<S2>": "sphere"}),
        (6, "single_or.json", 6, {"<Z>": "small", "<C>": "green", "<M>": "rubber", "<S>": "cylinder",
                                  "<R>": "behind", "<M2>": "metal", "<Z3>": "small", "<C3>": "green",
                                  "<M3>": "rubber"}),
        (8, "one_hop.json", 4, {"<Z>": "small", "<M>": "metal", "<R>": "front"}),
    ]
    for question_index, filename, index, given in cases:
        template = load_templates(clevr_templates_dir / filename)[index]
        values = {name: given.get(name) for name in template.params}
        assert program_to_json(expand_program(template, values)) == real[question_index]["program"]


# ---------------------------------------------------------------- balance


def _top_two(counts: dict[str, int]) -> tuple[int, int]:
    ordered = sorted(counts.values(), reverse=True) + [0]
    return ordered[0], ordered[1]


def test_no_answer_dominates_within_a_template(own_run, clevr_run) -> None:
    """Stated bound: in every template, most frequent answer <= 1.1 x second most frequent + 1."""
    for _, instances in (own_run, clevr_run):
        per_template: dict[int, Counter] = {}
        for _, q in instances:
            per_template.setdefault(q.template.family_index, Counter())[q.answer] += 1
        for counts in per_template.values():
            top, second = _top_two(counts)
            assert top <= RATIO * second + 1, counts


def test_the_balance_bound_fails_without_balancing(scenes: list[Scene]) -> None:
    """The bound above is not automatic: sampling options uniformly breaks it on the same scenes."""
    generator = QuestionGenerator(seed=3, balance=False)
    per_template: dict[int, Counter] = {}
    for scene in scenes[:120]:
        for q in generator.generate(scene, 10):
            per_template.setdefault(q["question_family_index"], Counter())[q["answer"]] += 1
    broken = [c for c in per_template.values() if _top_two(c)[0] > RATIO * _top_two(c)[1] + 1]
    assert len(broken) >= 10


# ---------------------------------------------------------------- text


def test_question_texts_are_clean(own_run, clevr_run) -> None:
    for _, instances in (own_run, clevr_run):
        for _, q in instances:
            text = q.text
            assert not any(c in text for c in "<>[]"), text
            assert "  " not in text and text == text.strip(), text
            assert text[0].isupper() and text.endswith("?"), text
            assert " ?" not in text and " ;" not in text, text
            assert " a object" not in text and " a other" not in text, text


def test_realise_fills_params_plurals_and_relations() -> None:
    rng = np.random.default_rng(0)
    params = {"<Z>": "size", "<C>": "color", "<M>": "material", "<S>": "shape", "<R>": "relation"}
    synonyms = {"thing": ["object"], "large": ["big"], "left": ["left of"]}
    values = {"<Z>": "large", "<C>": None, "<M>": None, "<S>": None, "<R>": "left"}
    text = realise("how many <Z> <C> <M> <S>s are <R> it ?", params, values, synonyms, rng)
    assert text == "How many big objects are left of it?"
    # A relation without a synonyms entry still reads as a phrase.
    assert realise("<S> <R> it", params, {**values, "<R>": "front", "<S>": "cube"}, {}, rng) == "Cube in front of it"
    assert tidy("is there a  object ; or a cube ?") == "Is there an object; or a cube?"
    other = "Are there any other <S>s like it?"
    assert realise(other, params, {**values, "<S>": "cube"}, {}, rng, drop_other=True) == "Are there any cubes like it?"


# ---------------------------------------------------------------- malformed templates

GOOD = {
    "text": ["How many <Z> <C> <M> <S>s are there?"],
    "nodes": [{"type": "scene", "inputs": []},
              {"type": "filter_count", "inputs": [0], "side_inputs": ["<Z>", "<C>", "<M>", "<S>"]}],
    "params": [{"type": "Size", "name": "<Z>"}, {"type": "Color", "name": "<C>"},
               {"type": "Material", "name": "<M>"}, {"type": "Shape", "name": "<S>"}],
    "constraints": [],
}


def _broken(**changes) -> dict:
    template = json.loads(json.dumps(GOOD))
    template.update(changes)
    return template


@pytest.mark.parametrize(
    ("broken", "field", "detail"),
    [
        (_broken(text=[]), "text", "non-empty list"),
        (_broken(text=["How many <Q>s?"]), "text", "<Q>"),
        (_broken(params=[{"type": "Weight", "name": "<Z>"}]), "params", "Weight"),
        (_broken(nodes=[{"type": "scene", "inputs": []}, {"type": "filter_cuont", "inputs": [0]}]), "nodes",
         "unknown function"),
        (_broken(nodes=[{"type": "scene", "inputs": []},
                        {"type": "filter_count", "inputs": [0], "side_inputs": ["<Z>", "<C>", "<M>", "<X>"]}]),
         "nodes", "<X>"),
        (_broken(nodes=[{"type": "scene", "inputs": []},
                        {"type": "filter_unique", "inputs": [0], "side_inputs": ["<Z>", "<C>", "<M>", "<S>"]}]),
         "nodes", "not an answer"),
        (_broken(constraints=[{"type": "OUT_NEQ", "params": [1, 7]}]), "constraints", "node indices"),
        (_broken(constraints=[{"type": "NULL", "params": ["<W>"]}]), "constraints", "<W>"),
        ({k: v for k, v in GOOD.items() if k != "nodes"}, "nodes", "missing"),
    ],
)
def test_malformed_template_names_file_template_and_field(tmp_path: Path, broken: dict, field: str, detail: str) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([GOOD, broken]))
    with pytest.raises(InputError) as error:
        load_templates(path)
    message = str(error.value)
    assert message.startswith("mine.json: template 1, field '" + field + "'"), message
    assert detail in message and "\n" not in message


def test_malformed_template_files(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("[{")
    with pytest.raises(InputError, match="bad.json: not valid JSON"):
        load_templates(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text(json.dumps({"text": []}))
    with pytest.raises(InputError, match="bad.json: expected a JSON list"):
        load_templates(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps([GOOD, "nope"]))
    with pytest.raises(InputError, match="bad.json: template 1: expected a template"):
        load_templates(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        load_templates(tmp_path / "missing.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no template files"):
        load_templates(empty)
