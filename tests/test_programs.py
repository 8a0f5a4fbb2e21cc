"""The fast executor against CLEVR's real questions and the reference executor (the spec)."""

from __future__ import annotations

import json
import pickle
import random
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clevr_game.errors import InputError
from clevr_game.programs import (
    ALL_FUNCTIONS,
    INVALID,
    INVALID_ANSWER,
    Node,
    SceneFacts,
    compile_program,
    compile_scene,
    compile_scene_dict,
    execute,
    execute_scene,
    execute_trace,
    executor,
    parse_program,
    reference_execute,
)
from clevr_game.programs.cold import NotPlain, cold_answer
from clevr_game.programs.executor import HOT_AFTER
from clevr_game.programs.facts import relation_directions, relation_masks
from clevr_game.programs.interpreter import _BUILDERS as interpreter_builders
from clevr_game.programs.random_programs import ANSWER_TYPES, random_program
from clevr_game.programs.reference import _run_node
from clevr_game.programs.signatures import SIGNATURES, check_program
from clevr_game.scene import (
    DEFAULT_DIRECTIONS,
    load_scenes,
    parse_scene,
    relation_matrices,
    relationships_from_matrices,
)
from clevr_game.vocab import ATTRIBUTES, CLEVR, CLEVR_POC, RELATIONS, Vocabulary

# ------------------------------------------------------------------ helpers


@cache
def _read_scene_dicts(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["scenes"]


@pytest.fixture(scope="module")
def real_scene_dicts(clevr_real: Path) -> list[dict[str, Any]]:
    return _read_scene_dicts(clevr_real / "CLEVR_val_scenes_500.json") + _read_scene_dicts(
        clevr_real / "CLEVR_train_scenes_1000.json"
    )


def scene_dict(ids: np.ndarray, coords: np.ndarray, vocabulary: Vocabulary = CLEVR) -> dict[str, Any]:
    """A CLEVR scene dict with relationships computed by the world's own rule."""
    objects = [
        {a: vocabulary.values(a)[int(k)] for a, k in zip(ATTRIBUTES, row, strict=True)} | {"3d_coords": list(xyz)}
        for row, xyz in zip(ids, coords, strict=True)
    ]
    relationships = relationships_from_matrices(relation_matrices(coords, DEFAULT_DIRECTIONS))
    return {"objects": objects, "relationships": relationships, "directions": dict(DEFAULT_DIRECTIONS)}


def reference_trace(program: tuple[Node, ...], scene: dict[str, Any]) -> list[Any]:
    """Every node's output by the reference's own node semantics, in the fast trace's encoding."""
    outputs: list[Any] = []
    for node in program:
        args = [outputs[i] for i in node.inputs]
        if any(a is INVALID for a in args):
            outputs.append(INVALID)
            continue
        decoded = [sorted(j for j in range(len(scene["objects"])) if a >> j & 1) if _is_set(program, i) else a
                   for a, i in zip(args, node.inputs, strict=True)]
        out = _run_node(scene, node.function, decoded, node.value_inputs)
        if out == INVALID_ANSWER:
            out = INVALID
        elif isinstance(out, list):
            out = sum(1 << j for j in set(out))
        outputs.append(out)
    return outputs


def _is_set(program: tuple[Node, ...], index: int) -> bool:
    return SIGNATURES[program[index].function][1] == "ObjectSet"


scenes_strategy = st.integers(0, 10).flatmap(
    lambda n: st.tuples(
        st.lists(
            st.tuples(*(st.integers(0, len(CLEVR.values(a)) - 1) for a in ATTRIBUTES)), min_size=n, max_size=n
        ),
        st.lists(
            st.tuples(st.floats(-3, 3), st.floats(-3, 3), st.sampled_from([0.35, 0.7])), min_size=n, max_size=n
        ),
    )
)


def arrays(drawn: tuple[list, list]) -> tuple[np.ndarray, np.ndarray]:
    ids, coords = drawn
    return np.array(ids, dtype=np.int64).reshape(-1, 4), np.array(coords, dtype=np.float64).reshape(-1, 3)


def facts_of(ids: np.ndarray, coords: np.ndarray) -> SceneFacts:
    return SceneFacts.from_arrays(ids, coords, DEFAULT_DIRECTIONS, CLEVR)


def popcount(mask: int) -> int:
    return bin(mask).count("1")


def both_tiers(drawn: tuple[Node, ...], facts: SceneFacts) -> str:
    """The answer of the interpreter, checked equal to the generated code's."""
    compiled = compile_program(drawn)
    interpreted = compiled.interpreted_answer(facts)
    assert compiled.generate()(facts) == interpreted, compiled.source
    return interpreted


def program(*nodes: tuple) -> tuple[Node, ...]:
    """program(("scene",), ("filter_color", [0], ["red"]), ...)."""
    return tuple(Node(f, tuple(i[0]) if i else (), tuple(i[1]) if len(i) > 1 else ()) for f, *i in nodes)


# ------------------------------------------------------------------ real CLEVR


def test_real_questions_give_their_answers(clevr_real: Path) -> None:
    questions = json.loads((clevr_real / "CLEVR_val_questions_sample9.json").read_text())["questions"]
    scenes = {s.image_index: s for s in load_scenes(clevr_real / "CLEVR_val_scenes_sample11.json")}
    assert len(questions) == 9
    for question in questions:
        scene = scenes[question["image_index"]]
        parsed = parse_program(question["program"])
        facts = compile_scene(scene)
        assert execute(parsed, facts) == question["answer"], question["question"]
        assert execute_scene(parsed, scene) == question["answer"]
        assert execute_scene(parsed, scene.to_json()) == question["answer"]
        assert execute_trace(parsed, facts)[-1] is not INVALID


def test_fast_equals_reference_on_all_real_scenes(real_scene_dicts: list[dict[str, Any]]) -> None:
    assert len(real_scene_dicts) == 1500
    rng = random.Random(20240601)
    functions: set[str] = set()
    outcomes = {"valid": 0, "invalid": 0}
    for index, data in enumerate(real_scene_dicts):
        facts = compile_scene_dict(data)
        for _ in range(6):
            drawn = random_program(rng, objects=data["objects"], composites=index % 2 == 0)
            expected = reference_execute(drawn, data)
            assert execute(drawn, facts) == expected, (index, drawn)
            assert both_tiers(drawn, facts) == expected, (index, drawn)
            functions.update(node.function for node in drawn)
            outcomes["invalid" if expected == INVALID_ANSWER else "valid"] += 1
    assert functions == ALL_FUNCTIONS
    # The comparison means something only if many programs get past their unique nodes.
    assert outcomes["valid"] > 0.3 * sum(outcomes.values())


def test_trace_matches_reference_node_by_node(real_scene_dicts: list[dict[str, Any]]) -> None:
    rng = random.Random(7)
    for data in real_scene_dicts[:300]:
        facts = compile_scene_dict(data)
        for _ in range(3):
            drawn = random_program(rng, objects=data["objects"])
            assert execute_trace(drawn, facts) == reference_trace(drawn, data), drawn


def test_from_arrays_equals_compile_scene_on_real_scenes(clevr_real: Path) -> None:
    scenes = load_scenes(clevr_real / "CLEVR_val_scenes_500.json") + load_scenes(
        clevr_real / "CLEVR_train_scenes_1000.json"
    )
    for scene in scenes:
        stored = compile_scene(scene)  # from the stored relationships
        recomputed = SceneFacts.from_arrays(scene.attribute_ids(), scene.coords(), scene.directions, scene.vocabulary)
        assert recomputed == stored, scene.image_index
        assert recomputed.relationships() == {rel: [sorted(r) for r in scene.relationships[rel]] for rel in RELATIONS}
        assert stored.with_coords(scene.coords()) == stored


def test_compile_scene_without_stored_relationships_computes_them(clevr_real: Path) -> None:
    scene = load_scenes(clevr_real / "CLEVR_val_scenes_sample11.json")[3]
    stored = compile_scene(scene)
    scene.relationships = None
    assert compile_scene(scene) == stored


def test_catalogue_matches_clevr_metadata() -> None:
    from clevr_game.datafiles import CLEVR_METADATA

    metadata = json.loads(CLEVR_METADATA.read_text())
    catalogue = {f["name"]: (tuple(f["inputs"]), f["output"]) for f in metadata["functions"]}
    assert catalogue == SIGNATURES
    assert set(catalogue) == ALL_FUNCTIONS == set(interpreter_builders)


def test_every_clevr_template_compiles(clevr_templates_dir: Path) -> None:
    count = 0
    for path in sorted(clevr_templates_dir.glob("*.json")):
        for template in json.loads(path.read_text()):
            for node in template["nodes"]:
                # Placeholders become a relation or "any", so only the structure is checked.
                node["side_inputs"] = ["left" if v.startswith("<R") else "" for v in node.get("side_inputs", [])]
            compiled = compile_program(parse_program(template["nodes"], f"{path.name}: "))
            assert compiled.types[-1] != "ObjectSet"
            count += 1
    assert count == 90


def test_cold_path_equals_reference_and_both_compiled_tiers(real_scene_dicts: list[dict[str, Any]]) -> None:
    rng = random.Random(11)
    outcomes = {"valid": 0, "invalid": 0}
    for index, data in enumerate(real_scene_dicts[:400]):
        facts = compile_scene_dict(data)
        for _ in range(4):
            drawn = random_program(rng, objects=data["objects"], composites=index % 2 == 1, odd_values=0.1)
            expected = reference_execute(drawn, data)
            assert cold_answer(drawn, facts) == expected, drawn
            assert compile_program(drawn).interpreter.answer(facts) == expected
            assert both_tiers(drawn, facts) == expected
            outcomes["invalid" if expected == INVALID_ANSWER else "valid"] += 1
    assert min(outcomes.values()) > 0.25 * sum(outcomes.values())


def test_a_program_is_compiled_only_when_it_is_run_again() -> None:
    facts = facts_of(np.array([[0, 1, 0, 0], [1, 1, 1, 1]]), np.array([[-2.0, 0.0, 0.35], [1.0, 1.0, 0.7]]))
    fresh = program(("scene",), ("filter_color", [0], ["red"]), ("filter_material", [1], ["metal"]), ("count", [2]))

    def compilations() -> int:
        info = executor._compile_cached.cache_info()
        return info.hits + info.misses

    before = compilations()
    assert execute(fresh, facts) == "1"
    assert compilations() == before  # answered cold: nothing looked up, nothing built
    assert execute(fresh, facts) == "1"
    assert execute(fresh, facts) == "1"
    assert compilations() == before + 1  # compiled on the second run, found by identity after
    assert executor._BY_IDENTITY[id(fresh)] == (fresh, compile_program(fresh))
    # A list is never kept by identity (it could change): compiled (and cached by content) every time.
    assert execute(list(fresh), facts) == "1"


_MUTATIONS = (
    "function", "input -1", "input itself", "input later", "input True", "input 0.0", "inputs list",
    "input dropped", "input added", "inputs swapped", "value int", "values dropped", "values list",
    "relation above", "value empty", "node dict", "function unhashable",
)


def _mutated(drawn: tuple[Node, ...], data: st.DataObject) -> tuple:
    """`drawn` with one node or field made odd: the kind of thing only the full check should judge."""
    index = data.draw(st.integers(0, len(drawn) - 1))
    node, kind = drawn[index], data.draw(st.sampled_from(_MUTATIONS))
    function, inputs, values = node.function, node.inputs, node.value_inputs
    first_input = {"input -1": -1, "input itself": index, "input later": index + 3, "input True": True,
                   "input 0.0": 0.0}
    if kind == "function":
        function = data.draw(st.sampled_from(sorted(ALL_FUNCTIONS)))
    elif kind in first_input:
        inputs = (first_input[kind], *inputs[1:])
    elif kind == "inputs list":
        inputs = list(inputs)
    elif kind == "input dropped":
        inputs = inputs[1:]
    elif kind == "input added":
        inputs = (*inputs, 0)
    elif kind == "inputs swapped":
        inputs = tuple(reversed(inputs))
    elif kind == "value int":
        values = (*values, 3)
    elif kind == "values dropped":
        values = ()
    elif kind == "values list":
        values = list(values)
    elif kind == "relation above":
        values = ("above", *values[1:])
    elif kind == "value empty":
        values = ("", *values[1:])
    replaced: Any = Node(function, inputs, values)  # type: ignore[arg-type]
    if kind == "node dict":
        replaced = node.to_json()
    elif kind == "function unhashable":
        replaced = Node([function], inputs, values)  # type: ignore[arg-type]
    return drawn[:index] + (replaced,) + drawn[index + 1:]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.data())
def test_cold_path_answers_exactly_what_the_full_check_accepts(seed: int, data: st.DataObject) -> None:
    ids = np.array([[0, 1, 0, 0], [1, 1, 1, 1], [0, 2, 0, 2]])
    coords = np.array([[-2.0, 0.0, 0.35], [0.0, 1.0, 0.7], [2.0, -1.0, 0.35]])
    facts, scene = facts_of(ids, coords), scene_dict(ids, coords)
    drawn = _mutated(random_program(random.Random(seed), objects=scene["objects"]), data)
    try:
        check_program(drawn)  # type: ignore[arg-type]
    except InputError as exc:
        with pytest.raises(NotPlain):
            cold_answer(drawn, facts)  # type: ignore[arg-type]
        with pytest.raises(InputError) as raised:
            execute(drawn, facts)  # type: ignore[arg-type]
        assert str(raised.value) == str(exc)
        return
    try:
        answer = cold_answer(drawn, facts)  # type: ignore[arg-type]
    except NotPlain:  # allowed: the full check accepts something unusual; execute still answers it
        answer = execute(drawn, facts)  # type: ignore[arg-type]
    assert answer == reference_execute(drawn, scene) == both_tiers(drawn, facts)  # type: ignore[arg-type]


# ------------------------------------------------------------------ properties


@settings(max_examples=60, deadline=None)
@given(scenes_strategy, st.integers(0, 2**32 - 1))
def test_random_scenes_fast_equals_reference(drawn: tuple[list, list], seed: int) -> None:
    ids, coords = arrays(drawn)
    data = scene_dict(ids, coords)
    facts = facts_of(ids, coords)
    assert facts == compile_scene_dict(data)
    rng = random.Random(seed)
    for answer_type in ANSWER_TYPES:
        drawn_program = random_program(rng, objects=data["objects"], answer_type=answer_type)
        answer = execute(drawn_program, facts)  # never raises, whatever fails inside
        assert answer == reference_execute(drawn_program, data) == both_tiers(drawn_program, facts)
        assert answer == INVALID_ANSWER or answer in CLEVR.answer_values or answer.isdigit()
        assert execute_trace(drawn_program, facts) == reference_trace(drawn_program, data)


@settings(max_examples=60, deadline=None)
@given(scenes_strategy)
def test_relations_follow_the_world_rule(drawn: tuple[list, list]) -> None:
    ids, coords = arrays(drawn)
    matrices = relation_matrices(coords, DEFAULT_DIRECTIONS)
    masks = relation_masks(coords, DEFAULT_DIRECTIONS)
    for r, rel in enumerate(RELATIONS):
        for i in range(len(coords)):
            assert masks[r][i] == sum(1 << j for j in np.flatnonzero(matrices[rel][i]))
            assert not masks[r][i] >> i & 1


@settings(max_examples=80, deadline=None)
@given(scenes_strategy, st.sampled_from(ATTRIBUTES), st.data())
def test_count_exist_unique_laws(drawn: tuple[list, list], attribute: str, data: st.DataObject) -> None:
    ids, coords = arrays(drawn)
    facts = facts_of(ids, coords)
    value = data.draw(st.sampled_from(CLEVR.values(attribute)))
    expected = [i for i in range(len(ids)) if CLEVR.values(attribute)[ids[i][ATTRIBUTES.index(attribute)]] == value]
    base = (("scene",), (f"filter_{attribute}", [0], [value]))
    trace = execute_trace(program(*base, ("count", [1])), facts)
    assert trace[1] == sum(1 << i for i in expected)
    assert trace[2] == popcount(trace[1]) == len(expected)
    exists = execute(program(*base, ("exist", [1])), facts)
    assert exists == ("yes" if len(expected) > 0 else "no")
    unique = execute_trace(program(*base, ("unique", [1])), facts)[2]
    assert unique == (expected[0] if len(expected) == 1 else INVALID)
    answer = execute(program(*base, ("unique", [1]), (f"query_{attribute}", [2])), facts)
    assert answer == (value if len(expected) == 1 else INVALID_ANSWER)


@settings(max_examples=60, deadline=None)
@given(scenes_strategy)
def test_same_never_contains_the_object_itself(drawn: tuple[list, list]) -> None:
    ids, coords = arrays(drawn)
    facts = facts_of(ids, coords)
    for a, attribute in enumerate(ATTRIBUTES):
        for i in range(len(ids)):
            others = {j for j in range(len(ids)) if j != i and ids[j][a] == ids[i][a]}
            assert facts.same_as(attribute, i) == sum(1 << j for j in others)
        for i in range(len(ids)):
            # Pick object i by all its attributes; when that is unique, same_* must exclude it.
            nodes = [("scene",)]
            for b, other in enumerate(ATTRIBUTES):
                nodes.append((f"filter_{other}", [len(nodes) - 1], [CLEVR.values(other)[ids[i][b]]]))
            nodes += [("unique", [len(nodes) - 1]), (f"same_{attribute}", [len(nodes)])]
            trace = execute_trace(program(*nodes), facts)
            if trace[-2] is not INVALID:
                assert not trace[-1] >> trace[-2] & 1


@settings(max_examples=60, deadline=None)
@given(scenes_strategy, st.data())
def test_union_intersect_laws(drawn: tuple[list, list], data: st.DataObject) -> None:
    ids, coords = arrays(drawn)
    facts = facts_of(ids, coords)
    colors = data.draw(st.lists(st.sampled_from(CLEVR.colors), min_size=3, max_size=3))
    leaves = [("scene",)] + [("filter_color", [0], [c]) for c in colors]

    def run(*ops: tuple) -> list[Any]:
        return execute_trace(program(*leaves, *ops), facts)

    a, b, c = run()[1:4]
    union_ab, union_ba = run(("union", [1, 2]), ("union", [2, 1]))[4:]
    inter_ab, inter_ba = run(("intersect", [1, 2]), ("intersect", [2, 1]))[4:]
    assert union_ab == union_ba == a | b
    assert inter_ab == inter_ba == a & b
    assert run(("union", [1, 1]))[4] == a and run(("intersect", [1, 1]))[4] == a
    # Distributivity and absorption, evaluated by the executor itself.
    distributed = run(("union", [2, 3]), ("intersect", [1, 4]), ("intersect", [1, 2]),
                      ("intersect", [1, 3]), ("union", [6, 7]))
    assert distributed[5] == distributed[8]
    absorbed = run(("intersect", [1, 2]), ("union", [1, 4]))
    assert absorbed[5] == a
    assert popcount(union_ab) + popcount(inter_ab) == popcount(a) + popcount(b)


# ------------------------------------------------------------------ edge cases


def test_invalid_propagates_only_through_consumers() -> None:
    ids = np.array([[0, 1, 0, 0], [1, 1, 1, 1], [0, 2, 0, 2]])
    coords = np.array([[-2.0, 0.0, 0.35], [0.0, 0.0, 0.7], [2.0, 0.0, 0.35]])
    facts, data = facts_of(ids, coords), scene_dict(ids, coords)
    failing = ("unique", [0])  # three objects: unique of the scene fails
    unused_failure = program(("scene",), failing, ("scene",), ("count", [2]))
    consumed_failure = program(("scene",), failing, ("query_color", [1]), ("scene",), ("count", [3]))
    assert execute(unused_failure, facts) == reference_execute(unused_failure, data) == "3"
    assert execute(consumed_failure, facts) == reference_execute(consumed_failure, data) == INVALID_ANSWER
    assert both_tiers(unused_failure, facts) == "3"
    assert both_tiers(consumed_failure, facts) == INVALID_ANSWER
    assert execute_trace(consumed_failure, facts) == [7, INVALID, INVALID, 7, 3]
    set_answer = program(("scene",), ("filter_color", [0], ["red"]))
    assert execute(set_answer, facts) == both_tiers(set_answer, facts) == INVALID_ANSWER


def test_empty_and_unknown_values_follow_the_reference() -> None:
    ids = np.array([[0, 1, 0, 0], [1, 1, 1, 1]])
    coords = np.array([[-2.0, 0.0, 0.35], [1.0, 1.0, 0.7]])
    facts, data = facts_of(ids, coords), scene_dict(ids, coords)
    cases = [
        program(("scene",), ("filter_color", [0], [""]), ("count", [1])),  # a plain filter: "" matches none
        program(("scene",), ("filter", [0], ["", "red"]), ("count", [1])),  # a template filter: "" is any
        program(("scene",), ("filter", [0], ["", "", "", "", "extra"]), ("count", [1])),
        program(("scene",), ("filter_color", [0], ["pink"]), ("exist", [1])),
        program(("scene",), ("filter_unique", [0], ["large"]), ("relate_filter_count", [1], ["left"])),
        program(("scene",), ("filter_unique", [0], ["small"]), ("query_shape", [1])),
    ]
    for case in cases:
        assert execute(case, facts) == reference_execute(case, data) == both_tiers(case, facts), case
    assert [execute(c, facts) for c in cases] == ["0", "2", "2", "no", "1", "cube"]


def test_object_answers_and_empty_scene() -> None:
    facts = facts_of(np.zeros((0, 4), dtype=np.int64), np.zeros((0, 3)))
    assert facts.count == 0 and facts.everything == 0
    assert execute(program(("scene",), ("count", [0])), facts) == "0"
    assert execute(program(("scene",), ("unique", [0])), facts) == INVALID_ANSWER
    one = facts_of(np.array([[1, 7, 1, 2]]), np.array([[0.0, 0.0, 0.7]]))
    assert execute(program(("scene",), ("unique", [0])), one) == "0"
    assert execute(program(("scene",), ("unique", [0]), ("query_color", [1])), one) == "yellow"


def test_poc_vocabulary_facts() -> None:
    ids = np.array([[1, 0, 0, 3], [2, 3, 1, 3]])  # medium gray rubber cone, large green metal cone
    coords = np.array([[0.0, 0.0, 0.5], [2.0, 2.0, 0.7]])
    facts = SceneFacts.from_arrays(ids, coords, DEFAULT_DIRECTIONS, CLEVR_POC)
    assert facts.value_mask("shape", "cone") == 0b11
    assert facts.value_mask("size", "medium") == 0b01
    assert execute(program(("scene",), ("filter_shape", [0], ["cone"]), ("count", [1])), facts) == "2"
    data = scene_dict(ids, coords, CLEVR_POC) | {"vocabulary": "clevr-poc"}
    assert compile_scene_dict(data) == facts


def test_a_vocabulary_made_up_at_run_time_works() -> None:
    tiny = Vocabulary("tiny", ("tiny", "huge"), ("red", "teal"), ("rubber",), ("cube", "star"), {"tiny": 0.2, "huge": 1.0})
    facts = SceneFacts.from_arrays(np.array([[0, 1, 0, 1], [1, 1, 0, 0]]), np.array([[0.0, 0.0, 0.2], [2.0, 0, 1]]),
                                   DEFAULT_DIRECTIONS, tiny)
    teal_stars = program(("scene",), ("filter_color", [0], ["teal"]), ("filter_shape", [1], ["star"]),
                         ("count", [2]))
    template = program(("scene",), ("filter_unique", [0], ["tiny", "", "", ""]), ("query_shape", [1]))
    assert both_tiers(teal_stars, facts) == "1"
    assert both_tiers(template, facts) == "star"


def test_with_coords_recomputes_only_relations() -> None:
    ids = np.array([[0, 1, 0, 0], [1, 2, 1, 1]])
    facts = facts_of(ids, np.array([[-2.0, 0.0, 0.35], [2.0, 0.0, 0.7]]))
    moved_coords = np.array([[2.0, 0.0, 0.35], [-2.0, 0.0, 0.7]])
    moved = facts.with_coords(moved_coords)
    assert moved == facts_of(ids, moved_coords)
    assert moved.relation_rows() != facts.relation_rows() and moved.masks is facts.masks
    vectors = relation_directions(DEFAULT_DIRECTIONS)
    assert relation_directions(vectors) is vectors
    as_array = np.array(vectors)
    assert facts.with_coords(moved_coords, as_array) == moved
    assert SceneFacts.from_arrays(ids, moved_coords, vectors, CLEVR) == moved
    # Relations are computed when read, from a copy: reusing the coordinate buffer is safe.
    buffer = moved_coords.copy()
    lazy = facts.with_coords(buffer)
    buffer[:] = [[-2.0, 0.0, 0.35], [2.0, 0.0, 0.7]]
    assert lazy == moved
    # The attribute part is remembered per id array, whatever object carries the ids.
    assert SceneFacts.from_arrays(ids.tolist(), moved_coords, vectors, CLEVR).masks is moved.masks


def test_large_scenes_use_unbounded_bit_sets() -> None:
    count = 80
    ids = np.array([[i % 2, i % 8, i % 2, i % 3] for i in range(count)])
    coords = np.column_stack([np.linspace(-2.9, 2.9, count), np.zeros(count), np.full(count, 0.35)])
    facts, data = facts_of(ids, coords), scene_dict(ids, coords)
    rng = random.Random(3)
    for _ in range(40):
        drawn = random_program(rng, objects=data["objects"])
        assert execute(drawn, facts) == reference_execute(drawn, data)
    assert execute(program(("scene",), ("count", [0])), facts) == "80"


def test_a_program_run_often_gets_generated_code() -> None:
    facts = facts_of(np.array([[0, 1, 0, 0], [1, 1, 1, 1]]), np.array([[-2.0, 0.0, 0.35], [1.0, 1.0, 0.7]]))
    hot = program(("scene",), ("filter_color", [0], ["red"]), ("filter_size", [1], ["large"]),
                  ("unique", [2]), ("query_shape", [3]))
    compiled = compile_program(hot)
    assert "interpreted" in repr(compiled)
    answers = {execute(hot, facts) for _ in range(HOT_AFTER + 1)}
    assert answers == {"sphere"}
    assert "generated" in repr(compiled) and compiled.answer(facts) == "sphere"
    assert "def answer(facts):" in compiled.source


def test_compiled_programs_are_cached_and_pickle_keeps_invalid() -> None:
    first = program(("scene",), ("count", [0]))
    again = program(("scene",), ("count", [0]))
    assert compile_program(first) is compile_program(again)
    assert compile_program(list(first)) is compile_program(first)
    assert pickle.loads(pickle.dumps(INVALID)) is INVALID
    assert repr(INVALID) == "INVALID"


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([{"function": "scene", "inputs": []}, {"function": "frobnicate", "inputs": [0]}],
         "program node 1: unknown function 'frobnicate'"),
        ([{"function": "scene", "inputs": []}, {"function": "count", "inputs": [3]}],
         "program node 1: inputs must be indices of earlier nodes"),
        ([{"function": "scene", "inputs": []}, {"function": "union", "inputs": [0]}],
         "program node 1: union takes 2 inputs, got 1"),
        ([{"function": "scene", "inputs": [], "value_inputs": "red"}],
         "program node 0: value_inputs must be a list of strings"),
    ],
)
def test_parse_errors_name_the_node(nodes: list[dict], message: str) -> None:
    with pytest.raises(InputError, match=message):
        compile_program(parse_program(nodes))


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ((("scene",), ("query_color", [0])), "program node 1: query_color input 0 must be Object, node 0 gives ObjectSet"),
        ((("scene",), ("count", [0]), ("exist", [1])), "program node 2: exist input 0 must be ObjectSet"),
        ((("scene",), ("unique", [0]), ("relate", [1], ["above"])), "program node 2: unknown relation 'above'"),
        ((("scene",), ("unique", [0]), ("relate", [1])), "program node 2: relate needs a side input"),
        ((("scene",), ("filter_color", [0])), "program node 1: filter_color needs a side input"),
        ((("scene",), ("count", [1])), "program node 1: input 0 must be the index of an earlier node"),
        ((("scene",), ("bogus", [0])), "program node 1: unknown function 'bogus'"),
        ((), "program must be a non-empty"),
    ],
)
def test_compile_errors_name_the_node(nodes: tuple, message: str) -> None:
    with pytest.raises(InputError, match=message):
        compile_program(program(*nodes))
    if nodes:
        with pytest.raises(InputError, match=message):
            execute(program(*nodes), facts_of(np.zeros((0, 4), dtype=np.int64), np.zeros((0, 3))))


def test_a_program_equal_to_a_compiled_one_is_still_checked() -> None:
    facts = facts_of(np.array([[0, 1, 0, 0]]), np.array([[0.0, 0.0, 0.35]]))
    assert execute(compile_program(program(("scene",), ("count", [0]))).program, facts) == "1"
    for odd_index in (0.0, False):  # == 0, and hashed alike, but not an index the check takes
        odd = (Node("scene"), Node("count", (odd_index,)))
        with pytest.raises(InputError, match="program node 1: input 0 must be the index of an earlier node"):
            compile_program(odd)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="program node 1: input 0 must be the index"):
            execute(odd, facts)  # type: ignore[arg-type]


def test_unhashable_node_fields_are_input_errors() -> None:
    with pytest.raises(InputError, match="program node 0: inputs and value_inputs must be tuples"):
        compile_program((Node("scene", [], []),))  # type: ignore[arg-type]


def test_bad_arrays_are_input_errors() -> None:
    coords = np.zeros((1, 3))
    with pytest.raises(InputError, match="attribute_ids: a color id is outside the clevr vocabulary"):
        SceneFacts.from_arrays(np.array([[0, 8, 0, 0]]), coords, DEFAULT_DIRECTIONS, CLEVR)
    with pytest.raises(InputError, match="attribute_ids: a color id is outside"):
        SceneFacts.from_arrays(np.array([[0, -1, 0, 0]]), coords, DEFAULT_DIRECTIONS, CLEVR)
    with pytest.raises(InputError, match="coords: expected shape"):
        SceneFacts.from_arrays(np.array([[0, 0, 0, 0]]), np.zeros((2, 3)), DEFAULT_DIRECTIONS, CLEVR)
    with pytest.raises(InputError, match="directions: missing front"):
        SceneFacts.from_arrays(np.array([[0, 0, 0, 0]]), coords, {"left": [1, 0, 0], "right": [-1, 0, 0],
                                                                     "behind": [0, 1, 0]}, CLEVR)
    with pytest.raises(InputError, match=r"attribute_ids: expected shape \(N, 4\)"):
        SceneFacts.from_arrays(np.zeros((2, 3), dtype=np.int64), np.zeros((2, 3)), DEFAULT_DIRECTIONS, CLEVR)
    with pytest.raises(InputError, match="directions: expected a"):
        relation_directions(np.zeros((3, 4)))
    with pytest.raises(InputError, match="x.json: object 0: missing field 'color'"):
        compile_scene_dict({"objects": [{"size": "small"}]}, source="x.json")
    with pytest.raises(InputError, match="unknown color 'pink'"):
        execute_scene(program(("scene",), ("count", [0])), {"objects": [
            {"size": "small", "color": "pink", "material": "metal", "shape": "cube", "3d_coords": [0, 0, 0]}]})


def test_scene_objects_parse_unchanged_for_facts(clevr_real: Path) -> None:
    data = _read_scene_dicts(clevr_real / "CLEVR_val_scenes_sample11.json")[0]
    assert compile_scene_dict(data) == compile_scene(parse_scene(data))
