"""Adversarial-training export: a real attack run against a fragile player, exported and reloaded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.attack import AttackOptions, run_attack
from clevr_game.cli import main
from clevr_game.dataset import load_dataset
from clevr_game.errors import InputError
from clevr_game.export import ExportOptions, export_run, manipulation_record
from clevr_game.generate import generate_dataset
from clevr_game.layout import first_violation
from clevr_game.programs import execute_scene
from clevr_game.render import read_png
from clevr_game.scene import project_to_pixels
from clevr_game.text import default_word_vocabulary
from envs.game import Game
from envs.items import ItemPool, load_items
from players.protocol import Answer, Player, Query
from players.registry import register
from players.state.checkpoint import player_file_from, save_player_file
from players.state.features import ANSWERS
from players.state.models import build_model

REPO = Path(__file__).resolve().parents[1]
PLAYER = "fragile-export"
TINY_RN = {"width": 32, "word_width": 16, "question_width": 32, "g_layers": 2, "f_width": 32, "dropout": 0.0}


class FragilePlayer(Player):
    """Changes its answer whenever object 0 has left the place it first saw it.

    On the original scene it is right, except on items with an odd question index
    (wrong there from the start), so some flips are not accuracy drops.
    """

    needs = frozenset({"scene", "program"})
    name = PLAYER

    def __init__(self) -> None:
        self.first_seen: dict[str, np.ndarray] = {}

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers = []
        for q in queries:
            right = execute_scene(q.program, q.scene)
            wrong_before, wrong_after = [a for a in ("yes", "no", "0", "1") if a != right][:2]
            xy = np.array(q.scene.objects[0].coords[:2])
            start = self.first_seen.setdefault(q.item_id, xy)
            if np.abs(xy - start).max() > 1e-9:
                answers.append(Answer(q.item_id, wrong_after))
            else:
                unlucky = int(q.item_id.split(":")[1]) % 2 == 1
                answers.append(Answer(q.item_id, wrong_before if unlucky else right))
        return answers


register(PLAYER, FragilePlayer, replace=True)


@pytest.fixture(scope="module")
def attack_run(tmp_path_factory) -> Path:
    """A finished attack run (20 steps of training is plenty: the player breaks under most moves)."""
    root = tmp_path_factory.mktemp("attack")
    generate_dataset(root / "items", 8, 2, seed=3, min_objects=3, max_objects=5, progress=False)
    torch.manual_seed(0)
    words = default_word_vocabulary()
    network = build_model("relation-network", TINY_RN, len(words), len(ANSWERS)).eval()
    save_player_file(root / "rn.pt", player_file_from(network, "relation-network", words, list(ANSWERS), {}))
    run_attack(AttackOptions(
        player=PLAYER, items=str(root / "items"), minigame_size=10, steps=64, num_envs=16, eval_samples=8,
        adversary_weights=str(root / "rn.pt"), out=str(root / "run"), progress=False,
        stay_bias=2.0,  # an untrained adversary that moves most objects: most items get a manipulation
    ))
    # Most tests read the best manipulation per item; the attack's record of every move is kept aside.
    (root / "run" / "manipulations.jsonl").rename(root / "attack_manipulations.jsonl")
    return root / "run"


def test_every_move_the_attack_recorded_exports_and_reverifies(attack_run, tmp_path):
    run = _copy_run(attack_run, tmp_path / "run")
    shutil.copy(attack_run.parent / "attack_manipulations.jsonl", run / "manipulations.jsonl")
    every = export_run(ExportOptions(run=run, out=tmp_path / "all", select="all"))
    best = export_run(ExportOptions(run=attack_run, out=tmp_path / "best", select="all"))
    assert every.questions > best.questions > 0
    scenes, questions = load_dataset(tmp_path / "all" / "scenes.json", tmp_path / "all" / "questions.json")[:2]
    assert len(questions) == every.questions


def _items_folder(run: Path) -> Path:
    return Path(json.loads((run / "result.json").read_text())["options"]["items"])


def _copy_run(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, ignore=shutil.ignore_patterns("tb", "*.pt", "*.png"))
    return to


def _write_every_valid_move(run: Path, moves_per_item: int, seed: int) -> list[dict]:
    """What an attack recording every evaluated move writes: played for real against the fragile player."""
    pool = ItemPool(load_items(_items_folder(run)))
    game = Game(pool, FragilePlayer())
    rng = np.random.default_rng(seed)
    indices = np.repeat(np.arange(len(pool)), moves_per_item)
    heads = rng.permuted(np.tile(np.arange(10), (len(indices), 1)), axis=1)
    actions = rng.choice([2, 3, 4], size=(len(indices), 20))  # small steps: many valid moves
    records = [
        manipulation_record(o.item_id, o.moves, o.old_answer, o.new_answer, o.true_answer, o.changed,
                            o.dropped, o.new_scene)
        for o in game.play(indices, heads, actions) if o.valid
    ]
    (run / "manipulations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def _load(out: Path) -> tuple[list, list, list, list[dict]]:
    scenes, questions, scene_of = load_dataset(out / "scenes.json", out / "questions.json")
    manifest = json.loads((out / "manifest.json").read_text())["entries"]
    return scenes, questions, scene_of, manifest


# ------------------------------------------------------------------ the round trip


def test_exported_flips_reload_and_reexecute_to_their_answers(attack_run, tmp_path):
    summary = export_run(ExportOptions(run=attack_run, out=tmp_path / "out"))
    scenes, questions, scene_of, manifest = _load(tmp_path / "out")
    result = json.loads((attack_run / "result.json").read_text())
    flipped = {r["item_id"]: r for r in result["items"] if r["changed"]}
    assert summary.questions == len(questions) == len(manifest) == len(flipped) > 0
    assert [s.image_index for s in scenes] == list(range(len(scenes)))
    assert [s.image_filename for s in scenes] == [f"CLEVR_adversarial_{i:06d}.png" for i in range(len(scenes))]
    originals = {f"{q.image_index}:{q.index}": q for q in load_dataset(
        _items_folder(attack_run) / "scenes.json", _items_folder(attack_run) / "questions.json")[1]}
    for question, scene, entry in zip(questions, scene_of, manifest, strict=True):
        assert execute_scene(question.program, scene) == question.answer == entry["true_answer"]
        assert first_violation(scene.coords(), scene.radii(), scene.directions) is None
        assert scene.relationships == scene.computed_relationships()
        np.testing.assert_array_equal([o.pixel_coords[:2] for o in scene.objects],
                                      project_to_pixels(scene.coords())[:, :2])
        original = originals[entry["item_id"]]
        assert question.text == original.text and question.answer == original.answer
        assert entry["image_filename"] == scene.image_filename and entry["player"] == PLAYER
        assert entry["new_answer"] != entry["old_answer"] == flipped[entry["item_id"]]["old_answer"]
        best = flipped[entry["item_id"]]["best_manipulation"]
        assert entry["moves"] == best["moves"]
        assert [o["3d_coords"] for o in best["scene"]["objects"]] == [list(o.coords) for o in scene.objects]
    # The game's own loader takes the export as items to play on.
    assert [it.item_id for it in load_items(tmp_path / "out")] == [f"{e['image_index']}:{e['question_index']}"
                                                                   for e in manifest]


def test_drops_are_the_flips_of_right_answers(attack_run, tmp_path):
    export_run(ExportOptions(run=attack_run, out=tmp_path / "flips", select="flips"))
    export_run(ExportOptions(run=attack_run, out=tmp_path / "drops", select="drops"))
    flips = _load(tmp_path / "flips")[3]
    drops = _load(tmp_path / "drops")[3]
    assert 0 < len(drops) < len(flips)  # the player was wrong from the start on some flipped items
    assert all(e["old_answer"] == e["true_answer"] != e["new_answer"] for e in drops)
    assert {e["item_id"] for e in drops} == {e["item_id"] for e in flips if e["old_answer"] == e["true_answer"]}


def test_render_writes_an_image_for_every_scene(attack_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CLEVR_GAME_RENDER_CACHE", str(tmp_path / "cache"))  # really render
    out = tmp_path / "out"
    (out / "images").mkdir(parents=True)
    stale = out / "images" / "CLEVR_adversarial_999999.png"
    stale.write_bytes(b"left by an earlier export")
    assert main(["export", "--run", str(attack_run), "--out", str(out), "--render", "fast",
                 "--limit", "3", "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "scenes: 3 questions: 3 images: 3"
    scenes = _load(out)[0]
    for scene in scenes:
        image = read_png(out / "images" / scene.image_filename)
        assert image.shape == (240, 320, 3) and image.std() > 0
        # pixel_coords are for the rendered size
        np.testing.assert_array_equal([o.pixel_coords[:2] for o in scene.objects],
                                      project_to_pixels(scene.coords(), 320, 240)[:, :2])
    assert not stale.exists()
    assert sorted(p.name for p in (out / "images").iterdir()) == [s.image_filename for s in scenes]


# ------------------------------------------------------------------ every valid move, duplicates, seeds


def test_select_all_reads_every_recorded_move_and_removes_duplicates(attack_run, tmp_path):
    run = _copy_run(attack_run, tmp_path / "run")
    records = _write_every_valid_move(run, moves_per_item=6, seed=1)
    with (run / "manipulations.jsonl").open("a") as handle:  # each move recorded twice
        handle.writelines(json.dumps(r) + "\n" for r in records)
    summary = export_run(ExportOptions(run=run, out=tmp_path / "out", select="all"))
    assert not summary.warnings
    moved = [r for r in records if r["moves"]]
    distinct = {(r["item_id"], json.dumps([o["3d_coords"] for o in r["scene"]["objects"]])) for r in moved}
    assert summary.candidates == 2 * len(moved)
    assert summary.questions == len(distinct) and summary.duplicates == 2 * len(moved) - len(distinct)
    _, questions, scene_of, manifest = _load(tmp_path / "out")
    assert any(not e["changed"] for e in manifest) and any(e["changed"] for e in manifest)
    for question, scene in zip(questions, scene_of, strict=True):
        assert execute_scene(question.program, scene) == question.answer
    changed = {(r["item_id"], json.dumps([o["3d_coords"] for o in r["scene"]["objects"]]))
               for r in moved if r["changed"]}
    assert export_run(ExportOptions(run=run, out=tmp_path / "flips", select="flips")).questions == len(changed)


def test_select_all_without_the_record_of_every_move_warns_and_exports_the_best(attack_run, tmp_path, capsys):
    attack_run = _copy_run(attack_run, tmp_path / "old-run")
    (attack_run / "manipulations.jsonl").unlink(missing_ok=True)  # an attack that kept only the best move
    assert main(["export", "--run", str(attack_run), "--out", str(tmp_path / "out"), "--select", "all"]) == 0
    captured = capsys.readouterr()
    warning = captured.err.strip()
    assert warning.startswith("clevr-game: warning:") and "manipulations.jsonl" in warning
    assert len(warning.splitlines()) == 1
    best = export_run(ExportOptions(run=attack_run, out=tmp_path / "flips"))
    assert (tmp_path / "out" / "scenes.json").read_text() == (tmp_path / "flips" / "scenes.json").read_text()
    assert best.questions > 0


def _exported_items(run: Path, out: Path, **options) -> list[str]:
    export_run(ExportOptions(run=run, out=out, **options))
    return [e["item_id"] for e in _load(out)[3]]


def test_export_is_deterministic_and_the_limit_is_seeded(attack_run, tmp_path):
    chosen = _exported_items(attack_run, tmp_path / "a", limit=4, seed=7)
    assert _exported_items(attack_run, tmp_path / "b", limit=4, seed=7) == chosen
    for file in ("scenes.json", "questions.json", "manifest.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()
    everything = _exported_items(attack_run, tmp_path / "all")
    remaining = iter(everything)
    assert len(chosen) == 4 and all(i in remaining for i in chosen)  # a subsequence: the runs' order is kept
    draws = {tuple(_exported_items(attack_run, tmp_path / f"s{s}", limit=4, seed=s)) for s in range(6)}
    assert len(draws) > 1


def test_results_folder_exports_the_finished_trials(attack_run, tmp_path):
    results = tmp_path / "results"
    run = _copy_run(attack_run, results / "runs" / "trial-a")
    lines = [
        {"trial": "trial-a", "run": str(Path("moved-away") / "runs" / "trial-a")},  # found under RESULTS/runs
        {"trial": "trial-b", "run": str(results / "runs" / "trial-b"), "error": "player crashed"},
    ]
    (results / "trials.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    summary = export_run(ExportOptions(run=results, out=tmp_path / "out"))
    single = export_run(ExportOptions(run=run, out=tmp_path / "single"))
    assert summary.runs == 1 and summary.questions == single.questions
    assert {e["run"] for e in _load(tmp_path / "out")[3]} == {str(run)}


# ------------------------------------------------------------------ clear one-line failures


def _export_error(argv: list[str], capsys) -> str:
    assert main(["export", *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    return lines[0]


def test_interrupted_run_is_a_one_line_error(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "minigames.json").write_text("{}")
    message = _export_error(["--run", str(run), "--out", str(tmp_path / "out")], capsys)
    assert message == f"clevr-game: error: {run}: no result.json (the attack did not finish; rerun it to resume)"
    (tmp_path / "trials.jsonl").write_text(json.dumps({"trial": "t", "run": str(run)}) + "\n")
    assert _export_error(["--run", str(tmp_path), "--out", str(tmp_path / "out")], capsys) == message
    assert not (tmp_path / "out").exists()


def test_empty_selection_writes_nothing(attack_run, tmp_path, capsys):
    run = _copy_run(attack_run, tmp_path / "run")
    result = json.loads((run / "result.json").read_text())
    for item in result["items"]:  # as against a player no move could change
        item.update(changed=False, dropped=False, best_manipulation=None)
    (run / "result.json").write_text(json.dumps(result))
    (run / "manipulations.jsonl").write_text("")  # and no move of the evaluation changed anything
    message = _export_error(["--run", str(run), "--out", str(tmp_path / "out")], capsys)
    assert "nothing to export" in message and "changed the player's answer" in message
    assert not (tmp_path / "out").exists()
    (tmp_path / "failed").mkdir()
    (tmp_path / "failed" / "trials.jsonl").write_text(json.dumps({"run": "x", "error": "boom"}) + "\n")
    message = _export_error(["--run", str(tmp_path / "failed"), "--out", str(tmp_path / "out")], capsys)
    assert "no finished trial" in message


def test_a_move_that_changes_the_true_answer_is_a_hard_error_naming_the_item(attack_run, tmp_path):
    run = _copy_run(attack_run, tmp_path / "run")
    pool = ItemPool(load_items(_items_folder(run)))
    rng = np.random.default_rng(0)
    for _ in range(2000):  # a valid layout whose true answer differs: the game would have refused it
        item = pool.items[int(rng.integers(len(pool)))]
        obj = int(rng.integers(len(item.scene)))
        shift = rng.uniform(-1.5, 1.5, 2)
        coords = item.scene.coords()
        coords[obj, :2] += shift
        moved = item.scene.with_coords(coords)
        if (first_violation(coords, moved.radii(), moved.directions) is None
                and execute_scene(item.program, moved) != item.answer):
            break
    else:
        pytest.fail("no answer-changing move found")
    record = manipulation_record(item.item_id, [(obj, *shift)], "yes", "no", item.answer, True, False, moved)
    (run / "manipulations.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError, match=rf"line 1: item {item.item_id}: re-executing the program"):
        export_run(ExportOptions(run=run, out=tmp_path / "out", select="all"))


def test_bad_records_name_the_file_and_line(attack_run, tmp_path):
    run = _copy_run(attack_run, tmp_path / "run")
    records = _write_every_valid_move(run, moves_per_item=1, seed=2)
    del records[0]["scene"]
    (run / "manipulations.jsonl").write_text(json.dumps(records[1]) + "\n" + json.dumps(records[0]) + "\n")
    with pytest.raises(InputError, match=r"manipulations.jsonl: line 2: scene must be a CLEVR scene"):
        export_run(ExportOptions(run=run, out=tmp_path / "out", select="all"))
    with pytest.raises(InputError, match=r"is not in .*other items"):
        export_run(ExportOptions(run=attack_run, out=tmp_path / "out", items=_other_items(tmp_path)))


def _other_items(tmp_path: Path) -> Path:
    folder = tmp_path / "other"
    generate_dataset(folder, 1, 1, seed=9, progress=False)
    return folder


def test_export_imports_no_learning_library():
    code = ("import sys, clevr_game.export, clevr_game.cli; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'gymnasium', 'envs', 'agents', 'bpy'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
