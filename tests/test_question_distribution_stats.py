"""experiments.question_distribution: hand-counted statistics, both program forms alike, the side-by-side CLI."""

from __future__ import annotations

import json

import pytest

from clevr_game.errors import InputError
from experiments.question_distribution import main, statistics

# Each question in CLEVR's expanded form and in the template form CLEVR's generator works
# in (composites with their values), with the answer as the released files and as the
# generator spell it. Filters / nodes / words are counted by hand in the comments.
QUESTIONS = [
    {   # 3 filters, 5 nodes, 7 words, a count answering 2
        "image_index": 0, "template_filename": "zero_hop.json",
        "question": "How many large red cubes are there?",
        "expanded": [["scene", [], []], ["filter_size", [0], ["large"]], ["filter_color", [1], ["red"]],
                     ["filter_shape", [2], ["cube"]], ["count", [3], []]],
        "template": [["scene", [], []], ["filter_count", [0], ["large", "red", "", "cube"]]],
        "answer": "2", "raw_answer": 2,
    },
    {   # 2 filters, 7 nodes, 10 words
        "image_index": 0, "template_filename": "one_hop.json",
        "question": "What color is the metal thing left of the sphere?",
        "expanded": [["scene", [], []], ["filter_shape", [0], ["sphere"]], ["unique", [1], []],
                     ["relate", [2], ["left"]], ["filter_material", [3], ["metal"]], ["unique", [4], []],
                     ["query_color", [5], []]],
        "template": [["scene", [], []], ["filter_unique", [0], ["", "", "", "sphere"]],
                     ["relate_filter_unique", [1], ["left", "", "", "metal", ""]], ["query_color", [2], []]],
        "answer": "blue", "raw_answer": "blue",
    },
    {   # 1 filter, 3 nodes, 4 words; no template file: family "unknown"
        "image_index": 1,
        "question": "Is there a cube?",
        "expanded": [["scene", [], []], ["filter_shape", [0], ["cube"]], ["exist", [1], []]],
        "template": [["scene", [], []], ["filter_exist", [0], ["", "", "", "cube"]]],
        "answer": "yes", "raw_answer": True,
    },
    {   # 1 filter, 3 nodes, 3 words, a count answering 0
        "image_index": 1, "template_filename": "zero_hop.json",
        "question": "How many spheres?",
        "expanded": [["scene", [], []], ["filter_shape", [0], ["sphere"]], ["count", [1], []]],
        "template": [["scene", [], []], ["filter_count", [0], ["", "", "", "sphere"]]],
        "answer": "0", "raw_answer": 0,
    },
]


def _questions_file(path, form: str, scene_of=None):
    records = []
    for i, q in enumerate(QUESTIONS):
        if form == "expanded":
            program = [{"inputs": inputs, "function": f, "value_inputs": values} for f, inputs, values in q[form]]
        else:
            program = [{"type": f, "inputs": inputs, "side_inputs": values} for f, inputs, values in q[form]]
        record = {"image_index": q["image_index"] if scene_of is None else scene_of, "question": q["question"],
                  "program": program, "answer": q["answer"] if form == "expanded" else q["raw_answer"],
                  "question_index": i}
        if "template_filename" in q:
            record["template_filename"] = q["template_filename"]
        records.append(record)
    path.write_text(json.dumps({"info": {}, "questions": records}))
    return path


def _scenes_file(path, count: int = 2):
    path.write_text(json.dumps({"info": {}, "scenes": [
        {"image_index": i, "image_filename": f"CLEVR_val_{i:06d}.png", "objects": []} for i in range(count)]}))
    return path


@pytest.fixture
def files(tmp_path):
    return (_scenes_file(tmp_path / "scenes.json"), _questions_file(tmp_path / "expanded.json", "expanded"),
            _questions_file(tmp_path / "template.json", "template"))


def _values(result):
    return {name: entry["value"] for name, entry in result["statistics"].items()}


def test_the_statistics_are_the_hand_counts(files):
    scenes, expanded, _ = files
    result = statistics(scenes, expanded)
    values = _values(result)
    assert (result["scenes"], result["questions"]) == (2, 4)
    assert values["filters_per_question"] == pytest.approx(7 / 4)
    assert values["program_length"] == pytest.approx(18 / 4)
    assert values["words_per_question"] == pytest.approx(24 / 4)
    assert values["count_share"] == pytest.approx(0.5)
    assert values["count_answer_mean"] == pytest.approx(1.0)
    assert values["family_share/zero_hop"] == pytest.approx(0.5)
    assert values["family_share/one_hop"] == pytest.approx(0.25)
    assert values["family_share/unknown"] == pytest.approx(0.25)
    assert values["filters_per_question/zero_hop"] == pytest.approx(2.0)
    assert values["program_length/one_hop"] == pytest.approx(7.0)
    assert values["words_per_question/zero_hop"] == pytest.approx(5.0)
    assert values["count_answer_mean/zero_hop"] == pytest.approx(1.0)
    assert "count_answer_mean/one_hop" not in values
    assert {k: v for k, v in values.items() if k.startswith("answer_share/")} == pytest.approx(
        {"answer_share/2": 0.25, "answer_share/blue": 0.25, "answer_share/yes": 0.25, "answer_share/0": 0.25})
    assert result["bootstrap"]["resamples"] == 1000
    # Scene 0 averages 2.5 filters a question and scene 1 one: resampled scenes disagree.
    assert result["statistics"]["filters_per_question"]["se"] > 0
    assert result["statistics"]["questions_per_scene"]["se"] == 0


def test_both_program_forms_give_the_same_numbers(files):
    scenes, expanded, template = files
    assert statistics(scenes, template)["statistics"] == statistics(scenes, expanded)["statistics"]


def test_the_bootstrap_draws_scenes_not_questions(tmp_path):
    """With every question on one scene, a resample holds all of them or none: no spread."""
    scenes = _scenes_file(tmp_path / "scenes.json", count=1)
    result = statistics(scenes, _questions_file(tmp_path / "q.json", "expanded", scene_of=0))
    assert result["statistics"]["filters_per_question"] == {"value": 1.75, "se": 0.0}


def test_a_question_about_a_missing_scene_is_refused(tmp_path):
    scenes = _scenes_file(tmp_path / "scenes.json", count=1)
    with pytest.raises(InputError, match="scene 1 is not in"):
        statistics(scenes, _questions_file(tmp_path / "q.json", "expanded"))


def test_the_cli_prints_both_columns_and_writes_json(files, tmp_path, capsys):
    scenes, expanded, template = files
    out = tmp_path / "both.json"
    assert main(["--scenes", str(scenes), "--questions", str(expanded), "--questions", str(template),
                 "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"A = {expanded}") and lines[1].startswith(f"B = {template}")
    assert "B/A-1" in lines[2]
    row = next(line.split() for line in lines if line.startswith("filters_per_question "))
    assert row[1] == row[3] == "1.7500" and row[5] == "0.0%"
    assert any(line.startswith("answer distribution total variation distance (A, B): 0.0000") for line in lines)
    written = json.loads(out.read_text())
    assert written["answer_total_variation"]["value"] == 0
    assert [s["questions_file"] for s in written["questions"]] == [str(expanded), str(template)]
