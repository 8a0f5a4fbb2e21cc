"""`clevr-game answer`'s fast paths give what the full reader and the reference executor give (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clevr_game import answering
from clevr_game.answering import GENERATE_FROM, INTERPRET_FROM, _runner, answer_files, answer_table
from clevr_game.dataset import load_dataset
from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from clevr_game.programs import compile_program, parse_program, reference_execute
from clevr_game.scene import load_scenes
from perf import programs as perf_programs


@pytest.fixture(scope="module")
def real_val(clevr_real: Path, clevr_templates_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """CLEVR's templates asked 4 times on each of the first 60 real val scenes (240 questions)."""
    folder = tmp_path_factory.mktemp("real_val")
    data = json.loads((clevr_real / "CLEVR_val_scenes_500.json").read_text())
    scenes_path = folder / "val_scenes_60.json"
    scenes_path.write_text(json.dumps({"info": data["info"], "scenes": data["scenes"][:60]}))
    _, questions_path = generate_dataset(folder / "generated", 0, 4, seed=5, templates="clevr",
                                         clevr_templates=clevr_templates_dir, scenes_file=scenes_path, progress=False)
    return scenes_path, questions_path


def _reference_predictions(scenes_path: Path, questions_path: Path) -> list[dict[str, Any]]:
    """What the command wrote before it had fast paths: each question on its scene dict, by the reference."""
    scene_dicts = {s["image_index"]: s for s in json.loads(scenes_path.read_text())["scenes"]}
    return [
        {"question_index": q["question_index"], "image_index": q["image_index"],
         "answer": reference_execute(parse_program(q["program"]), scene_dicts[q["image_index"]])}
        for q in json.loads(questions_path.read_text())["questions"]
    ]


def _write(folder: Path, name: str, document: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(document))
    return path


# ------------------------------------------------------------------ real files


def test_answers_equal_the_reference_on_real_scenes(real_val: tuple[Path, Path], tmp_path: Path) -> None:
    scenes_path, questions_path = real_val
    expected = _reference_predictions(scenes_path, questions_path)
    assert len(expected) == 240 and {p["answer"] for p in expected} >= {"yes", "no", "0", "1", "cube", "red"}
    out = tmp_path / "predictions.json"
    assert answer_files(scenes_path, questions_path, out) == (240, 240)  # the generator's answers, all right
    assert out.read_text() == json.dumps({"predictions": expected})


def test_repeated_questions_take_every_tier_and_keep_their_answers(real_val: tuple[Path, Path], tmp_path: Path) -> None:
    scenes_path, questions_path = real_val
    document = json.loads(questions_path.read_text())
    # Question 0 asked GENERATE_FROM times, question 1 INTERPRET_FROM times, the rest once.
    asked = document["questions"]
    repeated = [asked[0]] * GENERATE_FROM + [asked[1]] * INTERPRET_FROM + asked[2:]
    document["questions"] = [dict(q, question_index=i) for i, q in enumerate(repeated)]
    path = _write(tmp_path, "repeated.json", document)
    out = tmp_path / "predictions.json"
    assert answer_files(scenes_path, path, out) == (len(repeated), len(repeated))
    assert out.read_text() == json.dumps({"predictions": _reference_predictions(scenes_path, path)})


def test_each_tier_answers_like_the_reference(real_val: tuple[Path, Path]) -> None:
    scenes_path, questions_path = real_val
    scenes, questions, scene_of = load_dataset(scenes_path, questions_path)
    scene_dicts = [scene.to_json() for scene in scene_of]
    for uses in (1, INTERPRET_FROM, GENERATE_FROM):
        table = answering.QuestionTable([q.index for q in questions], [q.image_index for q in questions],
                                        [q.program for q in questions], [q.answer for q in questions])
        by_index = {scene.image_index: scene for scene in scenes}
        runners = [_runner(q.program, uses) for q in questions]
        facts = {i: answering.compile_scene(s) for i, s in by_index.items()}
        answers = [run(facts[q.image_index]) for run, q in zip(runners, questions, strict=True)]
        expected = [reference_execute(q.program, d) for q, d in zip(questions, scene_dicts, strict=True)]
        assert answers == expected == answer_table(table, by_index), uses


def test_the_three_readers_give_the_same_questions(real_val: tuple[Path, Path]) -> None:
    scenes_path, questions_path = real_val
    scenes = load_scenes(scenes_path)
    by_msgspec = answering.read_questions_fast(questions_path, scenes)
    by_json = answering.read_questions_fast(questions_path, scenes, use_msgspec=False)
    full = answering._read_questions_full(scenes_path, questions_path)
    for table in (by_msgspec, by_json):
        assert table == full
        # Equal programs are one object, so each is checked and compiled once.
        assert len({id(p) for p in table.programs}) == len(set(table.programs)) < len(table.programs)


# ------------------------------------------------------------------ unusual files


@pytest.fixture
def small(clevr_real: Path, tmp_path: Path) -> tuple[Path, dict]:
    """The real sample: 11 val scenes, and 9 real questions as a JSON document to change."""
    scenes_path = tmp_path / "scenes.json"
    scenes_path.write_bytes((clevr_real / "CLEVR_val_scenes_sample11.json").read_bytes())
    return scenes_path, json.loads((clevr_real / "CLEVR_val_questions_sample9.json").read_text())


@pytest.fixture(params=["msgspec", "json"])
def fast_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each fast reader in turn: with msgspec, and with the standard json module (as without msgspec)."""
    if request.param == "json":
        monkeypatch.setattr(answering, "msgspec", None)
    return request.param


def _full_reader_error(scenes_path: Path, questions_path: Path) -> str:
    with pytest.raises(InputError) as raised:
        load_dataset(scenes_path, questions_path)
    return str(raised.value)


@pytest.mark.parametrize(
    "change",
    [
        lambda qs: qs[2].update(image_index=True),
        lambda qs: qs[2].update(image_index=1.0),
        lambda qs: qs[4].update(image_index=99),
        lambda qs: qs[3].update(answer=2.5),
        lambda qs: qs[3].update(question=None),
        lambda qs: qs[5].update(question_family_index="7"),
        lambda qs: qs[1].pop("program"),
        lambda qs: qs[1].update(program=[]),
        lambda qs: qs[0]["program"][1].update(function="filter_smell"),
        lambda qs: qs[0]["program"][1].update(value_inputs=["pink"]),
        lambda qs: qs[0]["program"][1].update(inputs=[5]),
        lambda qs: qs.append("not a question"),
    ],
)
def test_an_unusual_question_gets_the_full_readers_error(small: tuple[Path, dict], tmp_path: Path, change,
                                                         fast_reader: str) -> None:
    scenes_path, document = small
    change(document["questions"])
    questions_path = _write(tmp_path, "questions.json", document)
    with pytest.raises(InputError) as raised:
        answer_files(scenes_path, questions_path)
    assert str(raised.value) == _full_reader_error(scenes_path, questions_path)


def test_a_file_that_is_not_utf8_in_a_field_nobody_reads_is_still_an_error(small: tuple[Path, dict],
                                                                             tmp_path: Path, fast_reader: str) -> None:
    scenes_path, document = small
    document["questions"][0]["image_filename"] = "PLACEHOLDER"  # a field the fast reader skips unread
    questions_path = tmp_path / "questions.json"
    questions_path.write_bytes(json.dumps(document).encode().replace(b"PLACEHOLDER", b"caf\xe9"))
    with pytest.raises(InputError, match="not UTF-8 text"):
        answer_files(scenes_path, questions_path)


def test_a_byte_order_mark_is_the_full_readers_error(small: tuple[Path, dict], tmp_path: Path,
                                                     fast_reader: str) -> None:
    scenes_path, document = small
    questions_path = tmp_path / "questions.json"
    questions_path.write_bytes(b"\xef\xbb\xbf" + json.dumps(document).encode())
    with pytest.raises(InputError) as raised:
        answer_files(scenes_path, questions_path)
    assert str(raised.value) == _full_reader_error(scenes_path, questions_path)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["questions"][0].update(question_index=True),  # kept, as isinstance(True, int)
        lambda d: d["questions"][0].update(question_index="a"),  # replaced by the position
        lambda d: d["questions"][0].update(extra=float("nan")),  # JSON only Python's json reads
        lambda d: d["questions"][1].update(answer=True),
        lambda d: [q.pop("answer") for q in d["questions"][:3]],
        lambda d: d["questions"][0]["program"][0].update(type="scene"),  # template spelling beside function
    ],
)
def test_unusual_but_valid_files_answer_as_the_full_reader_reads_them(small: tuple[Path, dict], tmp_path: Path,
                                                                     change, fast_reader: str) -> None:
    scenes_path, document = small
    change(document)
    questions_path = _write(tmp_path, "questions.json", document)
    _, questions, scene_of = load_dataset(scenes_path, questions_path)
    out = tmp_path / "predictions.json"
    correct, total = answer_files(scenes_path, questions_path, out)
    expected = [reference_execute(q.program, s.to_json()) for q, s in zip(questions, scene_of, strict=True)]
    assert json.loads(out.read_text())["predictions"] == [
        {"question_index": q.index, "image_index": q.image_index, "answer": a}
        for q, a in zip(questions, expected, strict=True)
    ]
    assert total == sum(q.answer is not None for q in questions)
    assert correct == sum(q.answer == a for q, a in zip(questions, expected, strict=True))


def test_a_plain_list_of_questions_reads_like_a_questions_file(small: tuple[Path, dict], tmp_path: Path,
                                                               fast_reader: str) -> None:
    scenes_path, document = small
    listed = _write(tmp_path, "listed.json", document["questions"])
    wrapped = _write(tmp_path, "wrapped.json", document)
    scenes = load_scenes(scenes_path)
    assert answering.read_questions_fast(listed, scenes) == answering.read_questions_fast(wrapped, scenes)
    assert answer_files(scenes_path, listed) == answer_files(scenes_path, wrapped) == (9, 9)


def test_the_first_ill_typed_program_in_file_order_is_reported(small: tuple[Path, dict], tmp_path: Path) -> None:
    scenes_path, document = small
    questions = document["questions"]
    query_a_set = [{"function": "scene", "inputs": []}, {"function": "query_color", "inputs": [0]}]
    count_an_object = [{"function": "scene", "inputs": []}, {"function": "unique", "inputs": [0]},
                       {"function": "count", "inputs": [1]}]
    # The second program is asked first in the file, and again later: it is the one reported.
    questions[6]["program"], questions[3]["program"], questions[8]["program"] = (
        query_a_set, count_an_object, count_an_object)
    questions_path = _write(tmp_path, "questions.json", document)
    with pytest.raises(InputError) as raised:
        compile_program(parse_program(count_an_object))
    with pytest.raises(InputError) as reported:
        answer_files(scenes_path, questions_path)
    assert str(reported.value) == str(raised.value) == "program node 2: count input 0 must be ObjectSet, node 1 gives Object"


# ------------------------------------------------------------------ the benchmark


def test_the_whole_process_benchmark_runs_small(clevr_real: Path) -> None:
    if not perf_programs.DATA.is_dir():
        pytest.skip(f"the benchmark reads {perf_programs.DATA}")
    rows = perf_programs.answer_command_rows(scene_count=12, copies=2, repeats=1)
    assert [row["unit"] for row in rows] == ["questions/s", "runs/s"]
    assert rows[0]["name"].startswith("answer command, 96 questions: ")
    assert all(row["baseline"] > 0 and row["value"] > 0 for row in rows)
