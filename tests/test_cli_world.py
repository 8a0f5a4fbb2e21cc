"""`clevr-game generate` and `clevr-game answer`: contracts users script against."""

from __future__ import annotations

import json

import pytest

from clevr_game.cli import main


def test_generate_is_byte_identical_for_a_seed(tmp_path, capsys):
    for name in ("a", "b", "c"):
        seed = 4 if name != "c" else 5
        assert main(["generate", "--num-scenes", "12", "--questions-per-scene", "4", "--seed", str(seed),
                     "--out", str(tmp_path / name), "--no-progress"]) == 0
    for file in ("scenes.json", "questions.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()
        assert (tmp_path / "a" / file).read_bytes() != (tmp_path / "c" / file).read_bytes()
    questions = json.loads((tmp_path / "a" / "questions.json").read_text())["questions"]
    assert len(questions) == 48
    keys = {"question", "program", "answer", "question_family_index", "template_filename",
            "image_index", "image_filename", "split", "question_index"}
    assert all(keys <= set(q) for q in questions)


def test_generated_answers_equal_executed_answers(tmp_path, capsys):
    main(["generate", "--num-scenes", "30", "--questions-per-scene", "6", "--seed", "1",
          "--out", str(tmp_path), "--no-progress"])
    capsys.readouterr()
    assert main(["answer", "--scenes", str(tmp_path / "scenes.json"),
                 "--questions", str(tmp_path / "questions.json")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "accuracy: 180/180"


def test_answer_on_the_real_clevr_files(clevr_real, tmp_path, capsys):
    out = tmp_path / "predictions.json"
    assert main(["answer", "--scenes", str(clevr_real / "CLEVR_val_scenes_sample11.json"),
                 "--questions", str(clevr_real / "CLEVR_val_questions_sample9.json"), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "accuracy: 9/9"
    assert [p["answer"] for p in json.loads(out.read_text())["predictions"]][:3] == ["no", "yes", "metal"]


def test_generate_with_clevr_templates_by_path(clevr_templates_dir, tmp_path, capsys):
    assert main(["generate", "--num-scenes", "10", "--questions-per-scene", "5", "--seed", "0",
                 "--templates", str(clevr_templates_dir), "--out", str(tmp_path), "--no-progress"]) == 0
    questions = json.loads((tmp_path / "questions.json").read_text())["questions"]
    assert {q["template_filename"] for q in questions} <= {p.name for p in clevr_templates_dir.glob("*.json")}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda q: q[2].update(image_index=99), "questions.json: question 2: image_index 99 is not in scenes.json"),
        (lambda q: q[1].pop("program"), "questions.json: question 1: missing field 'program'"),
        (lambda q: q[0]["program"][1].update(function="filter_smell"),
         "questions.json: question 0, program node 1: unknown function 'filter_smell'"),
    ],
)
def test_answer_reports_bad_questions_in_one_line(clevr_real, tmp_path, capsys, mutate, message):
    data = json.loads((clevr_real / "CLEVR_val_questions_sample9.json").read_text())
    mutate(data["questions"])
    (tmp_path / "questions.json").write_text(json.dumps(data))
    (tmp_path / "scenes.json").write_bytes((clevr_real / "CLEVR_val_scenes_sample11.json").read_bytes())
    assert main(["answer", "--scenes", str(tmp_path / "scenes.json"),
                 "--questions", str(tmp_path / "questions.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("clevr-game: error: ") and message in err and "\n" not in err


def test_answer_reports_a_bad_scene_value(clevr_real, tmp_path, capsys):
    data = json.loads((clevr_real / "CLEVR_val_scenes_sample11.json").read_text())
    data["scenes"][3]["objects"][2]["color"] = "pink"
    (tmp_path / "scenes.json").write_text(json.dumps(data))
    assert main(["answer", "--scenes", str(tmp_path / "scenes.json"),
                 "--questions", str(clevr_real / "CLEVR_val_questions_sample9.json")]) == 2
    assert "scenes.json: scene 3, object 2: unknown color 'pink' (expected one of gray, red" in capsys.readouterr().err
