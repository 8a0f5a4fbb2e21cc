"""`clevr-game evaluate` end to end on the frozen protocol's smoke budget (issue 64).

The players are real external processes speaking the JSON-lines protocol: one that
answers every question with the independent reference executor (never broken, so no
manipulation may be recorded), one that answers right on the original scenes and wrong
on any moved one (every valid move breaks it, so every record must be a move that kept
the true answer and every CLEVR rule), and a shipped pixel player wrapped in a script
that reads only the PNG (`--needs image`).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from benchmarks.card.evaluate import EvaluateOptions, last_line, run_evaluation
from benchmarks.card.manipulations import update_results_folder
from benchmarks.card.protocol import load_protocol
from benchmarks.gallery import breaks_a_clevr_rule
from benchmarks.records import read_trials
from clevr_game.cli import main
from clevr_game.errors import InputError
from clevr_game.programs import parse_program, reference_execute
from clevr_game.scene import parse_scene

CONTRACT_LINE = re.compile(r"^accuracy: \d\.\d{4} blind: \d\.\d{4} drop: \d\.\d{4} random-valid: \d\.\d{4}$")

REFERENCE_PLAYER = r'''
import json, sys
from clevr_game.programs import parse_program, reference_execute
for line in sys.stdin:
    query = json.loads(line)
    answer = reference_execute(parse_program(query["program"]), query["scene"])
    print(json.dumps({"id": query["id"], "answer": answer}), flush=True)
'''

# Right on the protocol's own scenes, wrong as soon as any object stands elsewhere.
FLIPPING_PLAYER = r'''
import json, sys
from clevr_game.programs import parse_program, reference_execute
originals = {s["image_index"]: [o["3d_coords"][:2] for o in s["objects"]]
             for s in json.load(open(sys.argv[1]))["scenes"]}
OTHER = {"yes": "no", "no": "yes", "large": "small", "small": "large", "rubber": "metal", "metal": "rubber",
         "cube": "sphere", "sphere": "cylinder", "cylinder": "cube", "gray": "red", "red": "blue", "blue": "green",
         "green": "brown", "brown": "purple", "purple": "cyan", "cyan": "yellow", "yellow": "gray"}
for line in sys.stdin:
    query = json.loads(line)
    scene = query["scene"]
    answer = reference_execute(parse_program(query["program"]), scene)
    coords = [o["3d_coords"][:2] for o in scene["objects"]]
    moved = any(abs(a - b) > 1e-6 for now, was in zip(coords, originals[scene["image_index"]]) for a, b in zip(now, was))
    if moved:
        answer = OTHER.get(answer) or str((int(answer) + 1) % 11)
    print(json.dumps({"id": query["id"], "answer": answer}), flush=True)
'''


def _script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _evaluate(tmp_path: Path, player: str, out: str, **options) -> dict:
    return run_evaluation(EvaluateOptions(player=player, out=str(tmp_path / out), budget="smoke",
                                          gallery_preset="schematic", progress=False, **options),
                          log=lambda line: None)


def test_a_player_that_answers_with_the_reference_executor_is_never_broken(tmp_path):
    script = _script(tmp_path, "reference.py", REFERENCE_PLAYER)
    card = _evaluate(tmp_path, f"subprocess:{sys.executable} {script}", "reference",
                     player_input={"needs": "scene,program"})
    assert card["clean_accuracy"]["value"] == 1.0 and card["clean_accuracy"]["answered"] == 20
    assert card["drop"] == 0.0 and card["random_valid_drop"] == 0.0 and card["search_drop"] == 0.0
    assert all(figures["drop"] == 0.0 for figures in card["adversaries"].values())
    assert card["manipulations"] == 0
    assert (tmp_path / "reference" / "manipulations.jsonl").read_text() == ""
    assert card["evaluation_errors"]["errors"] == 0 and card["unscored_items"] == 0
    assert CONTRACT_LINE.match(last_line(card))
    for name in ("card.json", "card.md", "card.html"):
        assert (tmp_path / "reference" / name).is_file()


def test_every_recorded_break_keeps_the_true_answer_and_every_clevr_rule(tmp_path):
    protocol = load_protocol()
    script = _script(tmp_path, "flipping.py", FLIPPING_PLAYER)
    player = f"subprocess:{sys.executable} {script} {protocol.items_folder / 'scenes.json'}"
    card = _evaluate(tmp_path, player, "flipping", player_input={"needs": "scene,program"})
    lines = [json.loads(line) for line in (tmp_path / "flipping" / "manipulations.jsonl").read_text().splitlines()]
    assert card["manipulations"] == len(lines) > 0
    assert card["drop"] > 0.5  # every valid move of an item it answered right is a break
    originals = {s["image_index"]: s for s in json.loads((protocol.items_folder / "scenes.json").read_text())["scenes"]}
    for record in lines:
        where = f"{record['adversary']} {record['item_id']} {record['moves']}"
        question, moved = record["question"], record["moved_scene"]
        assert record["original_scene"] == originals[question["image_index"]], where
        program = parse_program(question["program"])
        assert reference_execute(program, record["original_scene"]) == record["true_answer"] == question["answer"]
        assert reference_execute(program, moved) == record["true_answer"], where
        assert record["old_answer"] == record["true_answer"] != record["new_answer"], where
        assert breaks_a_clevr_rule(parse_scene(moved)) is None, where  # placement and visibility
        assert {"3d_coords", "directions", "relationships"} <= set(moved) | set(moved["objects"][0]), where
        assert record["moved_objects"] and all(
            moved["objects"][i]["3d_coords"][:2] != record["original_scene"]["objects"][i]["3d_coords"][:2]
            for i in record["moved_objects"]), where
    keys = [(r["adversary"], r["size"], r["minigame"], r["seed"], r["item_id"], json.dumps(r["moves"])) for r in lines]
    assert len(set(keys)) == len(keys)

    # A benchmark's results folder keeps the same records, and keeps them when the run folders are gone.
    records = list(read_trials(tmp_path / "flipping").values())
    results = tmp_path / "results"
    assert update_results_folder(results, records, protocol.items_folder) == len(lines)
    written = (results / "manipulations.jsonl").read_bytes()
    shutil.rmtree(tmp_path / "flipping" / "runs")
    assert update_results_folder(results, records, protocol.items_folder) == len(lines)
    assert (results / "manipulations.jsonl").read_bytes() == written


def test_the_same_seed_gives_the_same_card(tmp_path):
    first = _evaluate(tmp_path, "state-rn", "first")
    second = _evaluate(tmp_path, "state-rn", "second")
    first.pop("seconds"), second.pop("seconds")
    assert first == second
    for name in ("manipulations.jsonl", "trials.jsonl"):
        if name == "trials.jsonl":
            continue  # trial records hold their run folder and timings
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()
    other = _evaluate(tmp_path, "state-rn", "other_seed", seed=1)
    assert other["blind_accuracy"] != first["blind_accuracy"] or other["sizes"] != first["sizes"]


def test_a_resumed_evaluation_with_other_options_is_refused_in_one_line(tmp_path):
    _evaluate(tmp_path, "majority", "folder")
    with pytest.raises(InputError, match=r"begun with other options \(budget was 'smoke', now 'quick'\)"):
        run_evaluation(EvaluateOptions(player="majority", out=str(tmp_path / "folder"), budget="quick",
                                       progress=False), log=lambda line: None)


@pytest.mark.slow  # about 3 minutes: every move of the smoke budget rendered by Blender for the model
def test_an_image_model_over_subprocess_plugs_in_from_the_command_line(tmp_path, capsys):
    from tests.test_external_image_players import IMAGE_PLAYER

    script = _script(tmp_path, "image_player.py", IMAGE_PLAYER)
    out = tmp_path / "image"
    status = main(["evaluate", "--player", f"subprocess:{sys.executable} {script} 128 96", "--needs", "image",
                   "--image-size", "128x96", "--render-preset", "fast", "--budget", "smoke",
                   "--gallery-preset", "schematic", "--no-progress", "--out", str(out)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert status == 0 and CONTRACT_LINE.match(lines[-1])
    card = json.loads((out / "card.json").read_text())
    assert card["player"]["needs"] == ["image"] and card["player"]["image"]["width"] == 128
    assert card["clean_accuracy"]["value"] > 0.6 and card["evaluation_errors"]["errors"] == 0
    for record in map(json.loads, (out / "manipulations.jsonl").read_text().splitlines()):
        for field in ("original_image", "moved_image"):
            assert (out / record[field]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _record(size, game, seed, drop, random_valid=None, search=None):
    record = {"trial": f"t{size}-{game}-{seed}", "player": "p", "adversary": "state", "size": size, "minigame": game,
              "seed": seed, "drop": drop, "consistency": drop}
    if random_valid is not None:
        record["random_valid_drop"] = record["random_valid_consistency"] = random_valid
    if search is not None:
        record["search"] = {"drop": search, "consistency": search}
    return record


def test_the_card_counts_mini_games_and_holm_corrects_its_tests_by_hand():
    from scipy import stats as scipy_stats

    from benchmarks.card.summary import summarise

    state = {(10, 0): (0.30, 0.10), (10, 1): (0.20, 0.40), (10, 2): (0.50, 0.50), (10, 3): (0.60, 0.80),
             (10, 4): (0.25, 0.35), (100, 0): (0.05, 0.07), (100, 1): (0.02, 0.04), (100, 2): (0.01, 0.01)}
    baseline = {(10, 0): 0.01, (10, 1): 0.02, (10, 2): 0.0, (10, 3): 0.03, (10, 4): 0.04,
                (100, 0): 0.0, (100, 1): 0.01, (100, 2): 0.02}
    records = []
    for (size, game), drops in state.items():
        for seed, drop in enumerate(drops):  # two seeds of one mini-game: one unit
            records.append(_record(size, game, seed, drop, random_valid=baseline[(size, game)] if seed == 0 else None,
                                   search=0.0 if seed == 0 else None))
    designs = [{"size": 10, "minigames": 5, "seeds": 2, "steps": 1}, {"size": 100, "minigames": 3, "seeds": 2, "steps": 1}]
    card = summarise(records, designs, {})
    row10 = card["sizes"][0]["adversaries"]["state"]["drop"]
    assert row10["per_minigame"] == [0.2, 0.3, 0.5, 0.7, 0.3]
    assert row10["mean"] == pytest.approx(0.4)
    half = scipy_stats.t.ppf(0.975, 4) * scipy_stats.tstd([0.2, 0.3, 0.5, 0.7, 0.3]) / 5 ** 0.5
    assert (row10["low"], row10["high"]) == pytest.approx((0.4 - half, 0.4 + half), abs=1e-6)
    tests = {t["name"]: t for t in card["tests"]}
    raw = {
        "state vs random valid, size 10": scipy_stats.wilcoxon(
            [0.2 - 0.01, 0.3 - 0.02, 0.5, 0.7 - 0.03, 0.3 - 0.04], method="exact").pvalue,
        "state vs random valid, size 100": scipy_stats.wilcoxon(
            [0.06, 0.03 - 0.01, 0.01 - 0.02], method="exact").pvalue,
    }
    for name, p in raw.items():
        assert tests[name]["p"] == pytest.approx(p, abs=1e-6) and tests[name]["n"] in (5, 3)
    testable = sorted((t["p"], name) for name, t in tests.items() if t["p"] is not None)
    m, running = len(testable), 0.0
    for k, (p, name) in enumerate(testable):
        running = max(running, min(1.0, (m - k) * p))
        assert tests[name]["p_holm"] == pytest.approx(running, abs=1e-6), name
        assert tests[name]["significant"] == (running < 0.05)
    # the search found nothing: the strongest adversary is the trained one, over sizes the mean of size means
    assert card["drop_adversary"] == "state"
    assert card["drop"] == pytest.approx((0.4 + (0.06 + 0.03 + 0.01) / 3) / 2, abs=1e-6)
    assert card["worst_minigame"] == {"size": 10, "minigame": 3, "adversary": "state", "drop": 0.7}
    random_valid = (0.02 + 0.01) / 2  # (size 10: 0.1 / 5, size 100: 0.03 / 3), each size weighing the same
    assert card["random_valid_drop"] == pytest.approx(random_valid, abs=1e-6)
    assert card["relative_to_random_valid"]["ratio"] == pytest.approx(card["drop"] / random_valid, abs=1e-4)
