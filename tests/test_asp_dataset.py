"""Generated CLEVR-POC items: answers recomputed by a plain clingo program, balance, determinism, `poc solve`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_asp_oracle import oracle_answers

from clevr_game.asp import Environment, regions_of
from clevr_game.asp.dataset import attribute_quotas
from clevr_game.cli import main
from clevr_game.programs import parse_program, reference_execute
from clevr_game.scene import Scene, SceneObject, parse_scene
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC

ITEMS = 10


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("poc")
    assert main(["poc", "generate", "--environments", "2", "--items", str(ITEMS), "--seed", "11", "--out", str(out)]) == 0
    return out


def rows(scene: dict) -> list[tuple[str, str, str, str, int]]:
    return [(o["size"], o["color"], o["material"], o["shape"], o["region"]) for o in scene["objects"]]


def complete_scene(item: dict) -> Scene:
    partial = parse_scene(item["scene"], vocabulary=CLEVR_POC)
    hidden = parse_scene({"objects": [item["hidden_object"]]}, vocabulary=CLEVR_POC).objects[0]
    objects: list[SceneObject] = list(partial.objects)
    objects.insert(item["hidden_object"]["index"], hidden)
    scene = Scene(objects, vocabulary=CLEVR_POC)
    scene.relationships = scene.computed_relationships()
    return scene


def test_layout_of_the_dataset(dataset: Path) -> None:
    data = json.loads((dataset / "items.json").read_text())
    assert [e["id"] for e in data["environments"]] == ["env_000", "env_001"]
    for entry in data["environments"]:
        environment = Environment.load(dataset / entry["file"])
        assert (dataset / entry["text"]).read_text().splitlines() == environment.sentences == entry["constraints"]
        assert 5 <= environment.num_objects <= 9 and environment.num_objects == entry["num_objects"]
    assert len(data["items"]) == ITEMS


def test_answers_match_an_independent_clingo_program(dataset: Path) -> None:
    data = json.loads((dataset / "items.json").read_text())
    texts = {e["id"]: (dataset / e["file"]).read_text() for e in data["environments"]}
    for item in data["items"]:
        attribute = item["query_attribute"]
        assert item["asp"].startswith("query(Q) :- ")
        assert oracle_answers(texts[item["environment"]], rows(item["scene"]), item["asp"]) == item["answer"]
        assert 1 <= len(item["answer"]) < len(CLEVR_POC.values(attribute))
        assert item["answer"] == sorted(item["answer"])
        truth = item["hidden_object"][attribute]
        assert truth in item["answer"]
        scene = complete_scene(item)
        # The functional program singles out the hidden object in the complete scene.
        assert reference_execute(parse_program(item["program"]), scene.to_json()) == truth
        environment = Environment.load(dataset / f"environments/{item['environment']}.lp")
        assert environment.check(scene).ok
        partial = parse_scene(item["scene"], vocabulary=CLEVR_POC)
        assert regions_of(partial.coords()).tolist() == [o["region"] for o in item["scene"]["objects"]]
        assert item["scene"]["vocabulary"] == "clevr-poc"
        assert item["question"].startswith(f"What {attribute} is the missing ")


def test_query_attributes_and_answers_are_balanced(dataset: Path) -> None:
    items = json.loads((dataset / "items.json").read_text())["items"]
    counts = Counter(item["query_attribute"] for item in items)
    assert counts == Counter(attribute_quotas(ITEMS, {"color": 0.4, "shape": 0.4, "size": 0.1, "material": 0.1}))
    assert counts == Counter({"color": 4, "shape": 4, "size": 1, "material": 1})
    for attribute in ("color", "shape"):
        answers = [tuple(i["answer"]) for i in items if i["query_attribute"] == attribute]
        assert len(set(answers)) >= 3  # at most one repeat among four


def test_quotas_split_by_largest_remainder() -> None:
    weights = {"color": 0.4, "shape": 0.4, "size": 0.1, "material": 0.1}
    assert attribute_quotas(100, weights) == {"size": 10, "color": 40, "material": 10, "shape": 40}
    assert sum(attribute_quotas(7, weights).values()) == 7


def test_same_seed_gives_byte_identical_files(dataset: Path, tmp_path: Path) -> None:
    assert main(["poc", "generate", "--environments", "2", "--items", str(ITEMS), "--seed", "11", "--out", str(tmp_path)]) == 0
    produced = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert produced == sorted(p.relative_to(dataset) for p in dataset.rglob("*") if p.is_file())
    for relative in produced:
        assert (tmp_path / relative).read_bytes() == (dataset / relative).read_bytes(), relative


def test_cli_solve_prints_the_answer_set(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    item = json.loads((dataset / "items.json").read_text())["items"][0]
    scene_path, question_path = tmp_path / "partial.json", tmp_path / "q.lp"
    scene_path.write_text(json.dumps(item["scene"]))
    question_path.write_text(item["asp"].replace("query(Q)", "missing(Q)") + "\n")
    capsys.readouterr()
    environment = str(dataset / f"environments/{item['environment']}.lp")
    assert main(["poc", "solve", "--environment", environment, "--scene", str(scene_path), "--question", str(question_path)]) == 0
    assert capsys.readouterr().out.splitlines() == item["answer"]


def test_cli_check_reports_violations(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    item = json.loads((dataset / "items.json").read_text())["items"][0]
    scene = complete_scene(item)
    environment_path = dataset / f"environments/{item['environment']}.lp"
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(scene.to_json()))
    environment = Environment.load(environment_path)
    # Make every object identical in attributes: the twin rule must fail.
    ids = np.zeros((len(scene), len(ATTRIBUTES)), dtype=int)
    assert "No two objects are identical in all four attributes." in environment.check_ids(
        ids, regions_of(scene.coords())).failed
    twin = scene.to_json()
    for obj in twin["objects"]:
        obj.update(size="small", color="gray", material="rubber", shape="cube")
    bad.write_text(json.dumps(twin))
    capsys.readouterr()
    assert main(["poc", "check", "--environment", str(environment_path), "--scene", str(good)]) == 0
    assert capsys.readouterr().out.strip() == "satisfied"
    assert main(["poc", "check", "--environment", str(environment_path), "--scene", str(bad)]) == 1
    assert "violated: No two objects are identical in all four attributes." in capsys.readouterr().out
