"""Loading environments: clear one-line errors for malformed, unknown and unsatisfiable input; the generator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clevr_game.asp import Environment, environment_text, generate_environment, match_constraint
from clevr_game.asp.solve import brave_answers
from clevr_game.cli import main
from clevr_game.errors import InputError
from clevr_game.scene import Scene
from clevr_game.vocab import CLEVR_POC

BAD_ENVIRONMENTS = [
    ("object(0..3).\n:- object(X) at(X, 1).\n", r"bad\.lp: line 2: syntax error"),
    ("object(0..3).\n:- object(X), hasProperty(X, colour, red).\n", r"bad\.lp: line 2: unknown attribute 'colour'"),
    ("object(0..3).\n\n:- object(X), hasProperty(X, color, pink).\n", r"bad\.lp: line 3: unknown color 'pink'"),
    ("object(0..3).\n:- object(X), sameProperty(X, Y, hue).\n", r"line 2: unknown attribute 'hue'"),
    ("object(0..3).\n:- object(X), hasproperty(X, color, red).\n", r"line 2: unknown predicate hasproperty/3"),
    ("object(0..3).\n:- object(X), at(X).\n", r"line 2: at takes 2 arguments, got 1"),
    ("object(0..3).\n:- object(X), at(X, 7).\n", r"line 2: unknown region '7'"),
    ("object(0..3).\n:- #count { X : at(X, 0) } < 4.\n", r"bad\.lp: the environment is unsatisfiable"),
    ("object(0..3).\nhasProperty(0, color, red).\n", r"line 2: an environment may not define the model's predicate hasProperty/3"),
    ("object(0..3).\n{ extra(X) } :- object(X).\n", r"line 2: only plain rules and integrity constraints"),
    (":- object(X), at(X, 1), hasProperty(X, color, red).\n", r"bad\.lp: declares no objects"),
    ("object(1..3).\n", r"objects must be numbered 0\.\.N-1"),
    ("object(0;2).\n", r"objects must be numbered 0\.\.N-1, got 0, 2"),
    ("object(0..12).\n", r"13 objects cannot fit: at most 12 \(3 per region\)"),
    ("object(0..2).\n:- hasProperty(X, color, red), not at(Y, 1).\n", r"bad\.lp: line 2: unsafe variables"),
    ("object(0..2).\n#script (python)\ndef f(): pass\n#end.\n", r"line 2: unsupported statement"),
]


@pytest.mark.parametrize(("text", "message"), BAD_ENVIRONMENTS)
def test_bad_environment_gives_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as error:
        Environment.from_text(text, "bad.lp")
    assert "\n" not in str(error.value)


def test_helper_rules_are_allowed_and_checked_by_clingo() -> None:
    text = (
        "object(0..2).\nmetal_in(R) :- at(X, R), hasProperty(X, material, metal).\n"
        "% Region 1 holds a metal object.\n:- not metal_in(1).\n"
    )
    environment = Environment.from_text(text, "helper.lp")
    assert environment.check_method == "clingo"
    ids = np.array([[0, 0, 1, 0], [0, 1, 0, 0], [0, 2, 0, 0]])
    assert environment.check_ids(ids, np.array([1, 0, 0])).ok
    assert environment.check_ids(ids, np.array([2, 1, 0])).failed == ["Region 1 holds a metal object."]


def test_load_reads_files_and_names_missing_ones(tmp_path: Path) -> None:
    path = tmp_path / "env.lp"
    path.write_text("object(0..4).\n% No object in the scene is a cone.\n:- object(X), hasProperty(X, shape, cone).\n")
    environment = Environment.load(path)
    assert environment.num_objects == 5 and environment.sentences == ["No object in the scene is a cone."]
    with pytest.raises(InputError, match="no such file"):
        Environment.load(tmp_path / "missing.lp")


def test_cli_prints_one_line_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "bad.lp"
    env.write_text("object(0..1).\n:- object(X), hasProperty(X, colour, red).\n")
    scene = tmp_path / "scene.json"
    scene.write_text('{"objects": []}')
    assert main(["poc", "check", "--environment", str(env), "--scene", str(scene)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.lp: line 2: unknown attribute 'colour'" in err


def test_question_errors_are_clear() -> None:
    environment = Environment.from_text("object(0..1).\n", "e.lp")
    scene = Scene([], vocabulary=CLEVR_POC)
    with pytest.raises(InputError, match=r"q\.lp: the question defines no query\(Q\) or missing\(Q\) rule"):
        brave_answers(environment, scene, "answer(Q) :- hidden(X), hasProperty(X, color, Q).", question_name="q.lp")
    with pytest.raises(InputError, match=r"q\.lp: line 1: unknown attribute 'hue'"):
        brave_answers(environment, scene, "query(Q) :- hidden(X), hasProperty(X, hue, Q).", question_name="q.lp")
    with pytest.raises(InputError, match=r"q\.lp: line 2: syntax error"):
        brave_answers(environment, scene, "query(Q) :- hidden(X),\n hasProperty(X color, Q).", question_name="q.lp")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_environments_follow_the_rules(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 5 + 2 * seed
    specs = generate_environment(rng, n)
    assert len(specs) <= 15
    for region in range(4):
        assert sum(region in s.regions() for s in specs) >= 2
    text = environment_text(specs, n)
    environment = Environment.from_text(text, "gen.lp")  # proves satisfiability with clingo
    assert environment.num_objects == n and environment.check_method == "compiled"
    assert [match_constraint(c.asp) for c in environment.constraints] == specs
    assert environment.sentences == [s.sentence() for s in specs]
    again = generate_environment(np.random.default_rng(seed), n)
    assert [s.asp() for s in again] == [s.asp() for s in specs]


def test_generator_rejects_object_counts_outside_5_to_9() -> None:
    with pytest.raises(InputError, match="5 to 9"):
        generate_environment(np.random.default_rng(0), 4)


def test_cli_environment_writes_lp_and_english(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "env.lp"
    assert main(["poc", "environment", "--seed", "4", "--objects", "6", "--out", str(out)]) == 0
    environment = Environment.load(out)
    assert out.with_suffix(".txt").read_text().splitlines() == environment.sentences
    first = out.read_bytes()
    assert main(["poc", "environment", "--seed", "4", "--objects", "6", "--out", str(out)]) == 0
    assert out.read_bytes() == first
    assert "wrote" in capsys.readouterr().out
