"""Question families from the program's shape: agree with `template_filename` wherever a file names it,
and give per-family scores on CLEVR's own question format, which does not name it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clevr_game.cli import main
from clevr_game.dataset import load_questions
from clevr_game.generate import generate_dataset
from clevr_game.programs import Node
from clevr_game.questions import load_templates
from clevr_game.questions.templates import DEFAULT_TEMPLATE_DIR
from players.families import FAMILIES, family_from_program, question_family
from players.oracle import OraclePlayer
from players.pixel.images import ImageSpec, image_folder
from players.state.evaluation import evaluate_player


def _agreement(folder: Path) -> tuple[list[tuple[str, str, str]], set[str]]:
    questions = load_questions(folder / "questions.json")
    wrong = []
    for q in questions:
        expected = Path(q.raw["template_filename"]).stem
        inferred = family_from_program(q.program)
        if inferred != expected:
            wrong.append((expected, str(inferred), " ".join(n.function for n in q.program)))
    return wrong, {Path(q.raw["template_filename"]).stem for q in questions}


@pytest.mark.parametrize("templates", ["clevr", "own"])
def test_inferred_family_agrees_with_template_filename_on_generated_questions(
        templates: str, clevr_templates_dir: Path, tmp_path: Path) -> None:
    generate_dataset(tmp_path, 120, 10, seed=19, templates=templates, clevr_templates=clevr_templates_dir,
                     progress=False)
    wrong, families = _agreement(tmp_path)
    assert wrong == []
    assert families == set(FAMILIES)


@pytest.mark.parametrize("source", ["clevr", "own"])
def test_every_template_program_maps_to_its_file(source: str, clevr_templates_dir: Path) -> None:
    # Template-form programs (relate_filter_count, filter_unique, ...) of all 90 CLEVR / 85 own templates,
    # so a template the generator happened not to draw above is covered too.
    templates = load_templates(clevr_templates_dir if source == "clevr" else DEFAULT_TEMPLATE_DIR)
    wrong = [(t.filename, t.index_in_file) for t in templates if family_from_program(t.nodes) != t.family]
    assert wrong == []


def test_shapes_outside_the_nine_families_are_not_forced_into_one() -> None:
    scene = Node("scene")
    four_hops = (scene, Node("unique", (0,)), *(Node("relate", (i,), ("left",)) for i in range(1, 5)),
                 Node("count", (5,)))
    assert family_from_program(four_hops) is None


def test_real_clevr_questions_get_their_family_and_score_per_family(clevr_real: Path, tmp_path: Path) -> None:
    # CLEVR's own val questions: question_family_index but no template_filename.
    source = clevr_real / "CLEVR_val_questions_sample9.json"
    questions = load_questions(source)
    assert all("template_filename" not in q.raw for q in questions)
    families = [question_family(q) for q in questions]
    assert families == ["same_relate", "same_relate", "zero_hop", "one_hop", "comparison", "same_relate",
                        "single_or", "zero_hop", "one_hop"]  # read off each question's text by hand
    (tmp_path / "scenes.json").write_text((clevr_real / "CLEVR_val_scenes_sample11.json").read_text())
    (tmp_path / "questions.json").write_text(source.read_text())
    lines = evaluate_player(OraclePlayer(), tmp_path).lines()
    assert lines == ["comparison: 1.0000 (1/1)", "one_hop: 1.0000 (2/2)", "same_relate: 1.0000 (3/3)",
                     "single_or: 1.0000 (1/1)", "zero_hop: 1.0000 (2/2)", "accuracy: 1.0000"]


def test_named_template_wins_and_unreadable_shapes_fall_back_to_the_index(clevr_real: Path) -> None:
    question = load_questions(clevr_real / "CLEVR_val_questions_sample9.json")[0]
    question.raw = {**question.raw, "template_filename": "my_family.json"}
    assert question_family(question) == "my_family"
    question.raw = {k: v for k, v in question.raw.items() if k != "template_filename"}
    question.program = (Node("scene"), Node("unique", (0,)),
                        *(Node("relate", (i,), ("left",)) for i in range(1, 5)), Node("count", (5,)))
    assert question_family(question) == "39"


def test_players_eval_renders_only_the_images_real_clevr_questions_ask_about(
        clevr_real: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # A folder holding only CLEVR's own scenes.json (11 real val scenes) and questions.json (9 questions, all
    # about scene 0): a pixel player's eval renders that one image, not every scene of the file.
    monkeypatch.setenv("CLEVR_GAME_RENDER_CACHE", str(tmp_path / "render-cache"))
    folder = tmp_path / "real"
    folder.mkdir()
    (folder / "scenes.json").write_text((clevr_real / "CLEVR_val_scenes_sample11.json").read_text())
    (folder / "questions.json").write_text((clevr_real / "CLEVR_val_questions_sample9.json").read_text())
    code = main(["players", "eval", "--player", "neuro-symbolic", "--data", str(folder), "--render-workers", "1",
                 "--no-progress"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and lines[-1].startswith("accuracy: ")
    assert [line.split(":")[0] for line in lines[:-1]] == ["comparison", "one_hop", "same_relate", "single_or",
                                                          "zero_hop"]
    rendered = sorted(p.name for p in image_folder(folder, ImageSpec()).glob("*.png"))
    assert rendered == ["CLEVR_val_000000.png"]
    # A question about a scene the file does not hold stops before anything is rendered.
    questions = json.loads((folder / "questions.json").read_text())
    questions["questions"][4]["image_index"] = 99
    (folder / "questions.json").write_text(json.dumps(questions))
    assert main(["players", "eval", "--player", "neuro-symbolic", "--data", str(folder), "--no-progress"]) == 2
    assert "questions.json: question 4: image_index 99 has no scene" in capsys.readouterr().err
