"""The `poc` commands chain as the README writes them: environment, generate, solve.

Whether a region can hold an object is decided here with the independent clingo
encoding of tests/test_asp_oracle.py, not with the generator's own check.
"""

from __future__ import annotations

import json
import os

import clingo
import numpy as np
import pytest
from test_asp_oracle import DERIVED, DOMAINS, WORLD_RULES

from clevr_game.asp.envgen import environment_text, generate_environment
from clevr_game.cli import main


def regions_forced_empty(environment: str) -> list[int]:
    """Regions in which no scene of the environment has an object (fresh program per region)."""
    guess = """
    1 { hasProperty(X, P, V) : dom(P, V) } 1 :- object(X), attr(P).
    1 { at(X, R) : reg(R) } 1 :- object(X).
    """
    empty = []
    for region in range(4):
        control = clingo.Control(logger=lambda code, message: None)
        control.add("base", [], "\n".join([DOMAINS, DERIVED, *WORLD_RULES, guess, environment,
                                           f"occupied :- at(_, {region}). :- not occupied."]))
        control.ground([("base", [])])
        if not control.solve().satisfiable:
            empty.append(region)
    return empty


def test_the_readme_environment_no_longer_forces_region_3_empty():
    specs = generate_environment(np.random.default_rng(0), 7)
    assert regions_forced_empty(environment_text(specs, 7)) == []


def test_generated_environments_leave_every_region_usable_unless_asked():
    for seed in range(1, 7):
        objects = 5 + seed % 5
        specs = generate_environment(np.random.default_rng(seed), objects)
        assert regions_forced_empty(environment_text(specs, objects)) == [], seed
    # Asked for, the README's environment (seed 0, 7 objects) again forces region 3 empty.
    readme = generate_environment(np.random.default_rng(0), 7, allow_empty_regions=True)
    assert 3 in regions_forced_empty(environment_text(readme, 7))


def test_the_readme_chain_runs_as_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["poc", "environment", "--seed", "0", "--objects", "7", "--out", "env.lp"]) == 0
    assert main(["poc", "generate", "--environments", "2", "--items", "12", "--seed", "0", "--out", "poc/"]) == 0
    capsys.readouterr()
    stored = json.loads((tmp_path / "poc" / "items.json").read_text())["items"]

    assert main(["poc", "solve", "--items", "poc/", "--item", "7"]) == 0
    heading, *answer = capsys.readouterr().out.splitlines()
    assert heading == f"item 7 (poc:7): {stored[7]['question']}" and answer == stored[7]["answer"]

    assert main(["poc", "solve", "--items", "poc/", "--all"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "exact: 1.0000 (12/12 items)"

    # Each item's folder holds the three files the README's solve line reads.
    for item in stored:
        os.chdir(tmp_path / "poc" / "items" / f"{item['item_index']:04d}")
        assert main(["poc", "solve", "--environment", "env.lp", "--scene", "partial.json", "--question", "q.lp"]) == 0
        assert capsys.readouterr().out.split() == item["answer"]
    environment = (tmp_path / "poc" / "environments" / f"{stored[0]['environment']}.lp").read_text()
    assert (tmp_path / "poc" / "items" / "0000" / "env.lp").read_text() == environment


def test_solve_all_reports_an_item_whose_stored_answer_is_wrong(tmp_path, capsys):
    assert main(["poc", "generate", "--environments", "1", "--items", "4", "--seed", "3", "--out", str(tmp_path)]) == 0
    path = tmp_path / "items.json"
    data = json.loads(path.read_text())
    data["items"][2]["answer"] = ["nonsense"]
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["poc", "solve", "--items", str(tmp_path), "--all"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "exact: 0.7500 (3/4 items)" and lines[0].startswith("poc:2: solved ")


@pytest.mark.parametrize("argv, message", [
    (["--items", "DIR"], "give exactly one of --item K and --all"),
    (["--items", "DIR", "--item", "1", "--all"], "give exactly one of --item K and --all"),
    (["--items", "DIR", "--item", "1", "--scene", "p.json"], "drop --scene"),
    (["--item", "1"], "--item and --all need --items DIR"),
    (["--scene", "p.json"], "missing --environment, --question"),
])
def test_solve_options_that_do_not_fit_are_one_line(argv, message, capsys):
    assert main(["poc", "solve", *argv]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1


def test_solve_names_an_item_that_is_not_there(tmp_path, capsys):
    assert main(["poc", "generate", "--environments", "1", "--items", "2", "--seed", "3", "--out", str(tmp_path)]) == 0
    assert main(["poc", "solve", "--items", str(tmp_path), "--item", "9"]) == 2
    assert "items.json: no item 9 (2 items)" in capsys.readouterr().err
