"""Bad input stops with one line naming file, item and field, never a traceback or a quiet wrong score."""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.attack import AttackOptions, run_attack, whole_batches
from benchmarks.trials import clear_stale_run
from clevr_game import cli_types
from clevr_game.cli import build_parser, main
from clevr_game.dataset import load_dataset, load_questions
from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from clevr_game.programs import parse_program
from clevr_game.render.commands import check_render_inputs
from clevr_game.scene import Scene, load_scenes
from clevr_game.text import default_word_vocabulary
from envs.items import Item, ItemPool
from players.registry import weights_digest
from players.state.checkpoint import player_file_from, save_player_file
from players.state.features import ANSWERS
from players.state.models import build_model


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[dict, dict]:
    """A small valid generated dataset as JSON documents: (scenes file, questions file)."""
    folder = tmp_path_factory.mktemp("valid")
    generate_dataset(folder, 3, 2, seed=0, min_objects=3, max_objects=4, progress=False)
    return (json.loads((folder / "scenes.json").read_text()), json.loads((folder / "questions.json").read_text()))


def _write(folder: Path, scenes: Any, questions: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scenes.json").write_text(json.dumps(scenes))
    (folder / "questions.json").write_text(json.dumps(questions))
    return folder


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _one_line_error(argv: list[str]) -> str:
    code, _, err = _run(argv)
    assert code == 2, err
    err = err.strip()
    assert err.startswith("clevr-game: error: ") and "\n" not in err, err
    return err.removeprefix("clevr-game: error: ")


def _commands(folder: Path, tmp_path: Path) -> dict[str, list[str]]:
    scenes, questions = str(folder / "scenes.json"), str(folder / "questions.json")
    return {
        "answer": ["answer", "--scenes", scenes, "--questions", questions],
        "play": ["play", "--items", str(folder), "--episodes", "2", "--batch", "2"],
        "attack": ["attack", "--player", "oracle", "--items", str(folder), "--out", str(tmp_path / "run"),
                   "--no-progress"],
        "render": ["render", "--scenes", scenes, "--out", str(tmp_path / "images"), "--preset", "fast",
                   "--no-progress"],
        "players eval": ["players", "eval", "--player", "oracle", "--data", str(folder), "--no-progress"],
    }


# ---------------------------------------------------------------- item 10: a scene without objects


@pytest.mark.parametrize("command", ["answer", "play", "attack", "render", "players eval"])
def test_a_scene_without_objects_is_a_one_line_error_everywhere(dataset, tmp_path, command):
    scenes, questions = copy.deepcopy(dataset)
    scenes["scenes"][1].update(objects=[], image_index=7, relationships={rel: [] for rel in ("left", "right")})
    folder = _write(tmp_path / "data", scenes, questions)
    message = _one_line_error(_commands(folder, tmp_path)[command])
    assert message == "scenes.json: scene 1 (image_index 7): no objects (a scene needs at least one)"


def test_a_single_scene_file_without_objects_and_exports_item_loading(dataset, tmp_path):
    (tmp_path / "one.json").write_text(json.dumps({"objects": []}))
    with pytest.raises(InputError, match=r"^one\.json: no objects \(a scene needs at least one\)$"):
        load_scenes(tmp_path / "one.json")
    scenes, questions = copy.deepcopy(dataset)
    scenes["scenes"][0].update(objects=[], relationships={})
    folder = _write(tmp_path / "data", scenes, questions)
    with pytest.raises(InputError, match=r"^scenes\.json: scene 0: no objects"):
        load_dataset(folder / "scenes.json", folder / "questions.json")  # what `export` loads items with


def test_the_item_pool_refuses_an_empty_scene_built_in_code():
    program = parse_program([{"function": "scene"}, {"function": "exist", "inputs": [0]}])
    with pytest.raises(InputError, match=r"^item 0:0: the scene has no objects"):
        ItemPool([Item("0:0", Scene([]), "Is there anything?", program, "no")])


# ---------------------------------------------------------------- item 11: duplicate image_index


@pytest.mark.parametrize("command", ["answer", "play", "render"])
def test_a_duplicate_image_index_is_a_one_line_error(dataset, tmp_path, command):
    scenes, questions = copy.deepcopy(dataset)
    scenes["scenes"][2]["image_index"] = 0
    folder = _write(tmp_path / "data", scenes, questions)
    assert _one_line_error(_commands(folder, tmp_path)[command]) == "scenes.json: scenes 0 and 2 both have image_index 0"


def test_a_scene_without_image_index_counts_as_its_position(dataset, tmp_path):
    scenes, _ = copy.deepcopy(dataset)
    del scenes["scenes"][0]["image_index"]
    scenes["scenes"][1]["image_index"] = 0
    (tmp_path / "scenes.json").write_text(json.dumps(scenes))
    with pytest.raises(InputError, match=r"scenes 0 and 1 both have image_index 0 \(a scene without image_index"):
        load_scenes(tmp_path / "scenes.json")


def test_the_real_clevr_scene_files_still_load(clevr_real):
    for name in ("CLEVR_val_scenes_500.json", "CLEVR_train_scenes_1000.json", "CLEVR_val_scenes_sample11.json"):
        scenes = load_scenes(clevr_real / name)
        assert len({s.image_index for s in scenes}) == len(scenes) and all(s.objects for s in scenes)


# ---------------------------------------------------------------- item 12: unknown value inputs


def _with_program(dataset, program: list[dict], vocabulary: str | None = None) -> tuple[dict, dict]:
    scenes, questions = copy.deepcopy(dataset)
    if vocabulary:
        for scene in scenes["scenes"]:
            scene["vocabulary"] = vocabulary
    questions["questions"][0]["program"] = program
    return scenes, questions


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ([{"function": "scene"}, {"function": "filter_shape", "inputs": [0], "value_inputs": ["octarine"]},
          {"function": "count", "inputs": [1]}],
         "program node 1: filter_shape: unknown shape 'octarine' (expected one of cube, sphere, cylinder)"),
        ([{"function": "scene"}, {"function": "filter_shape", "inputs": [0], "value_inputs": ["cone"]},
          {"function": "count", "inputs": [1]}],
         "program node 1: filter_shape: unknown shape 'cone' (expected one of cube, sphere, cylinder)"),
        ([{"function": "scene"}, {"function": "unique", "inputs": [0]},
          {"function": "relate", "inputs": [1], "value_inputs": ["above"]}, {"function": "count", "inputs": [2]}],
         "program node 2: relate: unknown relation 'above' (expected one of left, right, behind, front)"),
        ([{"function": "scene"}, {"function": "filter_color", "inputs": [0], "value_inputs": []},
          {"function": "count", "inputs": [1]}],
         "program node 1: filter_color takes 1 value inputs, got []"),
        ([{"function": "scene", "value_inputs": ["red"]}, {"function": "count", "inputs": [0]}],
         "program node 0: scene takes 0 value inputs, got ['red']"),
        ([{"function": "scene"}, {"function": "filter_count", "inputs": [0], "value_inputs": ["", "pink", "", ""]}],
         "program node 1: filter_count: unknown color 'pink' (expected one of gray, red, blue, green, brown, "
         "purple, cyan, yellow)"),
    ],
)
def test_an_unknown_value_input_is_a_file_error(dataset, tmp_path, program, message):
    folder = _write(tmp_path / "data", *_with_program(dataset, program))
    commands = _commands(folder, tmp_path)
    assert _one_line_error(commands["answer"]) == f"questions.json: question 0, {message}"
    assert _one_line_error(commands["play"]) == f"questions.json: question 0, {message}"


def test_value_inputs_follow_the_scenes_vocabulary(dataset, tmp_path):
    cones = [{"function": "scene"}, {"function": "filter_shape", "inputs": [0], "value_inputs": ["cone"]},
             {"function": "count", "inputs": [1]}]
    folder = _write(tmp_path / "poc", *_with_program(dataset, cones, vocabulary="clevr-poc"))
    code, out, _ = _run(_commands(folder, tmp_path)["answer"])
    assert code == 0 and out.strip().splitlines()[-1].startswith("accuracy: ")
    any_color = [{"function": "scene"}, {"function": "filter_count", "inputs": [0], "value_inputs": ["", "red"]}]
    folder = _write(tmp_path / "template", *_with_program(dataset, any_color))
    assert _run(_commands(folder, tmp_path)["answer"])[0] == 0
    # Without scenes (pixel training and evaluation read questions alone) any vocabulary's values pass.
    (tmp_path / "questions.json").write_text(json.dumps(_with_program(dataset, cones)[1]))
    assert len(load_questions(tmp_path / "questions.json")) == len(dataset[1]["questions"])
    octarine = copy.deepcopy(cones)
    octarine[1]["value_inputs"] = ["octarine"]
    (tmp_path / "questions.json").write_text(json.dumps(_with_program(dataset, octarine)[1]))
    with pytest.raises(InputError, match=r"^questions\.json: question 0, program node 1: filter_shape: unknown shape"):
        load_questions(tmp_path / "questions.json")


# ---------------------------------------------------------------- items 13, 14: attack runs and steps


def test_steps_round_up_to_whole_batches():
    assert [whole_batches(s, 128) for s in (1, 128, 129, 3000)] == [128, 128, 256, 3072]
    with pytest.raises(InputError, match="must be at least 1"):
        whole_batches(0, 128)


def test_attack_resumes_only_with_the_options_it_began_with(dataset, tmp_path):
    generate_dataset(tmp_path / "items", 12, 1, seed=4, progress=False)
    run = tmp_path / "run"
    base = ["attack", "--player", "oracle", "--items", str(tmp_path / "items"), "--steps", "100",
            "--num-envs", "64", "--eval-samples", "1", "--out", str(run), "--no-progress"]
    code, out, err = _run(base)
    assert code == 0, err
    assert err.strip().splitlines()[0] == "attack: --steps 100 rounded up to 128 (whole batches of 64 envs x 1 step)"
    assert out.strip().splitlines()[-1].startswith("consistency: ")
    assert torch.load(run / "checkpoint.pt", weights_only=False)["history"]["steps"][-1] == 128

    advice = "resume with the same options or choose another folder with --out"
    assert _one_line_error([*base, "--seed", "1"]) == (
        f"{run}: its checkpoint.pt was written with other options (--seed was 0, now 1); {advice}")
    assert _one_line_error([*base, "--mode", "absolute"]) == (
        f"{run}: its checkpoint.pt was written with other options (--mode was 'displacement', now 'absolute'); "
        f"{advice}")
    assert _run(base)[0] == 0  # the same options resume

    # A checkpoint begun before rounding (steps as asked, trained in whole batches below it) still resumes.
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    state["config"]["steps"] = 100
    state["update"] = 1
    torch.save(state, run / "checkpoint.pt")
    code, _, err = _run(base)
    assert code == 0, err
    assert "attack: --steps 100 rounded down to 64 (whole batches of 64 envs x 1 step)" in err


def test_only_the_attack_command_reports_its_steps_rounded(tmp_path, capsys):
    # A benchmark trial calls run_attack with its preset's steps: they must not warn about themselves.
    generate_dataset(tmp_path / "items", 12, 1, seed=4, progress=False)
    result = run_attack(AttackOptions(player="oracle", items=str(tmp_path / "items"), steps=100, num_envs=64,
                                      eval_samples=1, out=str(tmp_path / "run"), progress=False))
    assert "rounded" not in capsys.readouterr().err
    assert "report_rounding" not in result["options"]


def _random_state_player(path: Path, seed: int) -> None:
    torch.manual_seed(seed)
    vocabulary = default_word_vocabulary()
    model = build_model("transformer", {"width": 16, "layers": 1, "heads": 2, "feedforward": 32, "fourier_bands": 2},
                        len(vocabulary), len(ANSWERS))
    save_player_file(path, player_file_from(model, "transformer", vocabulary, list(ANSWERS), {"note": "untrained"}))


def test_a_retrained_player_never_resumes_an_adversary_trained_against_the_old_one(tmp_path):
    generate_dataset(tmp_path / "items", 12, 1, seed=4, progress=False)
    weights, run = tmp_path / "player.pt", tmp_path / "run"
    _random_state_player(weights, seed=0)
    base = ["attack", "--player", f"file:{weights}", "--items", str(tmp_path / "items"), "--steps", "64",
            "--num-envs", "64", "--eval-samples", "1", "--out", str(run), "--no-progress"]
    assert _run(base)[0] == 0
    old = weights_digest(f"file:{weights}")
    assert json.loads((run / "options.json").read_text())["player_weights"] == old
    trial = {"run": str(run), "player_weights": old}
    assert not clear_stale_run(trial) and run.is_dir()  # the same weights resume

    _random_state_player(weights, seed=1)
    new = weights_digest(f"file:{weights}")
    assert new != old
    assert _one_line_error(base) == (
        f"{run}: its checkpoint.pt was written with other options (the player's weights (sha256 prefix) was "
        f"{old!r}, now {new!r}); resume with the same options or choose another folder with --out")
    # The benchmark clears such a folder, so the trial trains a fresh adversary against the new weights.
    assert clear_stale_run({**trial, "player_weights": new}) and not run.exists()

    # A folder from before options.json named the weights: the trial's earlier record says which it faced.
    assert _run(base)[0] == 0
    options = json.loads((run / "options.json").read_text())
    del options["player_weights"]
    (run / "options.json").write_text(json.dumps(options))
    assert _run(base)[0] == 0  # the attack itself cannot tell, and resumes
    assert not clear_stale_run({**trial, "player_weights": new})  # no record: kept
    assert not clear_stale_run({**trial, "player_weights": new, "folder_weights": new})
    assert clear_stale_run({**trial, "player_weights": new, "folder_weights": old}) and not run.exists()


def _all_options(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _all_options(sub, f"{prefix}{name} ")
        elif action.option_strings:
            found.append((f"{prefix}{action.option_strings[0]}", action))
    return found


def test_every_numeric_option_is_checked_by_the_parser():
    unchecked = [
        name for name, action in _all_options(build_parser())
        if action.type in (int, float)
        or (isinstance(action.default, (int, float)) and not isinstance(action.default, bool)
            and getattr(action.type, "__module__", None) != cli_types.__name__)
    ]
    assert unchecked == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["play", "--batch", "0"], "argument --batch: must be an integer in 1..16384, got '0'"),
        (["play", "--batch", "-1"], "argument --batch: must be an integer in 1..16384, got '-1'"),
        (["play", "--episodes", "-5"], "argument --episodes: must be an integer in 1..10000000, got '-5'"),
        (["play", "--seed", "-1"], "argument --seed: must be an integer seed in 0..4294967295, got '-1'"),
        (["benchmark", "--steps", "-5"], "argument --steps: must be an integer in 1..100000000, got '-5'"),
        (["benchmark", "--steps", "0"], "argument --steps: must be an integer in 1..100000000, got '0'"),
        (["benchmark", "--seeds", "0"], "argument --seeds: must be an integer in 1..1000, got '0'"),
        (["benchmark", "--minigames", "0"], "argument --minigames: must be an integer in 1..10000000, got '0'"),
        (["benchmark", "--sizes", "10,0"],
         "argument --sizes: must be comma-separated integers in 1..10000000 such as 10,100, got '10,0'"),
        (["attack", "--steps", "0"], "argument --steps: must be an integer in 1..100000000, got '0'"),
        (["attack", "--lr", "nan"], "argument --lr: must be a number in 0..10, got 'nan'"),
        (["attack", "--rewards", "1", "inf", "0", "0"], "argument --rewards: must be a number in -100..100, got 'inf'"),
        (["attack", "--num-envs", "x"], "argument --num-envs: must be an integer in 1..65536, got 'x'"),
        (["generate", "--num-scenes", "-1"], "argument --num-scenes: must be an integer in 0..1000000, got '-1'"),
        (["export", "--limit", "0"], "argument --limit: must be an integer in 1..10000000, got '0'"),
        (["adversarial-training", "--finetune-batch-size", "0"],
         "argument --finetune-batch-size: must be an integer in 1..4096, got '0'"),
        (["render", "--timeout", "0"], "argument --timeout: must be a number above 0, at most 86400, got '0'"),
        (["players", "train", "--eval-every", "0"], "argument --eval-every: must be an integer in 1..100000000, got '0'"),
        (["players", "eval", "--limit", "-3"], "argument --limit: must be an integer in 1..10000000, got '-3'"),
        (["poc", "generate", "--environments", "0"], "argument --environments: must be an integer in 1..10000, got '0'"),
    ],
)
def test_a_bad_number_stops_the_parser_with_one_line(argv, message):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert err.getvalue().strip().splitlines()[-1].endswith(f"error: {message}")


def test_probability_and_the_number_checks_accept_their_range():
    assert cli_types.probability("0") == 0.0 and cli_types.probability("1") == 1.0
    assert cli_types.non_negative_float("0") == 0.0 and cli_types.positive_int_list("10, 100") == "10, 100"
    assert cli_types.random_seed(str(2**32 - 1)) == 2**32 - 1
    for check, text in [(cli_types.probability, "1.5"), (cli_types.probability, "nan"),
                        (cli_types.random_seed, str(2**32)), (cli_types.positive_float, "-inf")]:
        with pytest.raises(argparse.ArgumentTypeError):
            check(text)


# ---------------------------------------------------------------- property tests: malformed JSON

VOCABULARY_WORDS = ["red", "cube", "large", "metal", "left", "cone", "medium", "octarine", "", "scene", "unique",
                    "filter_color", "count", "objects", "3d_coords", "image_index", "program", "value_inputs"]
garbage = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(VOCABULARY_WORDS) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(VOCABULARY_WORDS), inner, max_size=4),
    max_leaves=8,
)


def _mutate(document: Any, data: st.DataObject) -> Any:
    """One to three times: walk down a random path, then replace, delete or empty what is there."""
    document = copy.deepcopy(document)
    for _ in range(data.draw(st.integers(1, 3))):
        document = _mutate_once(document, data)
    return document


def _mutate_once(document: Any, data: st.DataObject) -> Any:
    if data.draw(st.integers(0, 19)) == 0:
        return data.draw(garbage)
    parent, key = None, None
    node = document
    # Mostly deep: attribute values and program nodes sit four to six levels down.
    while isinstance(node, (dict, list)) and node and data.draw(st.integers(0, 5)) > 0:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        parent, key = node, data.draw(st.sampled_from(keys))
        node = node[key]
    if parent is None:
        return data.draw(garbage)
    action = data.draw(st.sampled_from(["replace", "delete", "empty"]))
    if action == "delete":
        del parent[key]
    elif action == "empty" and isinstance(node, (dict, list)):
        parent[key] = type(node)()
    else:
        parent[key] = data.draw(garbage)
    return document


def _clean(code: int, out: str, err: str, last: str) -> None:
    if code == 0:
        assert out.strip().splitlines()[-1].startswith(last)
    else:
        lines = err.strip().splitlines()
        assert code in (1, 2) and len(lines) == 1 and lines[0].startswith("clevr-game: error: "), err


def _check_entry_points(folder: Path) -> None:
    scenes, questions = str(folder / "scenes.json"), str(folder / "questions.json")
    _clean(*_run(["answer", "--scenes", scenes, "--questions", questions]), "accuracy: ")
    _clean(*_run(["play", "--items", str(folder), "--episodes", "3", "--batch", "2"]), "consistency: ")
    try:
        check_render_inputs(scenes, "fast")
    except InputError as exc:
        assert "\n" not in str(exc)
        # The same check runs first in `render`, so Blender never starts here.
        _clean(*_run(["render", "--scenes", scenes, "--out", str(folder / "images"), "--no-progress"]), "")


PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(data=st.data())
def test_malformed_scenes_never_give_a_traceback(dataset, tmp_path_factory, data):
    scenes, questions = dataset
    folder = _write(tmp_path_factory.mktemp("scenes"), _mutate(scenes, data), questions)
    _check_entry_points(folder)


@PROPERTY
@given(data=st.data())
def test_malformed_questions_never_give_a_traceback(dataset, tmp_path_factory, data):
    scenes, questions = dataset
    folder = _write(tmp_path_factory.mktemp("questions"), scenes, _mutate(questions, data))
    _check_entry_points(folder)


def test_nan_and_huge_numbers_in_a_scene_are_named(dataset, tmp_path):
    scenes, questions = copy.deepcopy(dataset)
    scenes["scenes"][0]["objects"][1]["3d_coords"][0] = math.nan
    folder = _write(tmp_path / "data", scenes, questions)
    assert _one_line_error(_commands(folder, tmp_path)["answer"]) == (
        "scenes.json: scene 0, object 1: 3d_coords must be a finite number, got nan")


def test_fields_that_become_file_names_or_families_must_have_their_type(dataset, tmp_path):
    scenes, questions = copy.deepcopy(dataset)
    scenes["scenes"][1]["image_filename"] = 5  # rendering made it a file name: a TypeError there
    folder = _write(tmp_path / "scenes", scenes, questions)
    assert _one_line_error(_commands(folder, tmp_path)["render"]) == (
        "scenes.json: scene 1: image_filename must be a string, got 5")
    scenes, questions = copy.deepcopy(dataset)
    questions["questions"][3]["question_family_index"] = {"family": 1}
    folder = _write(tmp_path / "questions", scenes, questions)
    assert _one_line_error(_commands(folder, tmp_path)["answer"]) == (
        "questions.json: question 3: question_family_index must be an integer, got {'family': 1}")
