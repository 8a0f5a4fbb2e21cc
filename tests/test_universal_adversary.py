"""The universal adversary: a disjoint split, training that resumes across calls, a report with every row."""

from __future__ import annotations

import json

import pytest

from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from experiments.universal_adversary import main, make_split
from players.registry import SHIPPED_WEIGHTS, weights_digest


def test_split_keeps_training_and_heldout_items_apart():
    ids = [f"{i}:0" for i in range(100)]
    split = make_split(ids, train_size=60, heldout_minigames=3, minigame_size=10, heldout_items=30, seed=4)
    heldout, games = set(split["heldout"]), [set(g) for g in split["heldout_minigames"]]
    assert len(split["train"]) == 60 and len(heldout) == 30
    assert not heldout & set(split["train"])
    assert all(len(g) == 10 and g <= heldout for g in games) and not games[0] & games[1]
    assert make_split(ids, 60, 3, 10, 30, seed=4) == split != make_split(ids, 60, 3, 10, 30, seed=5)
    with pytest.raises(InputError, match="holds 100 items"):
        make_split(ids, train_size=90, heldout_minigames=3, minigame_size=10, heldout_items=30, seed=4)


def test_a_scene_split_holds_out_whole_scenes():
    ids = [f"{i}:{q}" for i in range(40) for q in range(3)]
    scene_of = [i for i in range(40) for _ in range(3)]
    split = make_split(ids, train_size=70, heldout_minigames=2, minigame_size=10, heldout_items=30, seed=4,
                       scene_of=scene_of)
    scene = dict(zip(ids, scene_of, strict=True))
    train_scenes, heldout_scenes = {scene[i] for i in split["train"]}, {scene[i] for i in split["heldout"]}
    assert split["heldout_by"] == "scenes" and not train_scenes & heldout_scenes
    assert 68 <= len(split["train"]) <= 70 and len(split["heldout"]) == 30  # whole scenes of three items
    assert {i for g in split["heldout_minigames"] for i in g} <= set(split["heldout"])
    # The item split (the committed results/universal) is unchanged by the new option.
    assert "heldout_by" not in make_split(ids, 70, 2, 10, 30, seed=4)


def test_a_tiny_universal_run_resumes_and_reports(tmp_path):
    generate_dataset(tmp_path / "items", 20, 5, seed=7, progress=False)
    out = tmp_path / "out"
    options = ["--items", str(tmp_path / "items"), "--player", "oracle", "--train-size", "60",
               "--heldout-items", "20", "--heldout-minigames", "1", "--minigame-steps", "256",
               "--num-envs", "32", "--eval-samples", "2", "--max-minutes", "0.02", "--out", str(out)]
    assert main(options) == 0
    assert main(options) == 0  # a second call continues the same training
    calls = json.loads((out / "progress.json").read_text())["calls"]
    assert len(calls) == 2 and calls[1]["from_step"] == calls[0]["to_step"] > 0
    report = (out / "report.md").read_text()
    assert "Held-out items are on scenes no training item uses." in report
    assert "| held-out items (20) | universal (last policy) |" in report and "per-mini-game adversaries (1 x size 10" in report
    result = json.loads((out / "result.json").read_text())
    assert result["universal"]["heldout"]["universal"]["drop"] == 0.0  # the oracle never breaks
    assert (out / "learning_curve.png").stat().st_size > 0


def test_a_retrained_player_is_refused_by_a_run_that_learned_the_old_one(tmp_path, capsys):
    generate_dataset(tmp_path / "items", 20, 5, seed=7, progress=False)
    weights = tmp_path / "player.pt"
    weights.write_bytes((SHIPPED_WEIGHTS / "state-transformer.pt").read_bytes())
    out = tmp_path / "out"
    options = ["--items", str(tmp_path / "items"), "--player", f"file:{weights}", "--train-size", "60",
               "--heldout-items", "20", "--heldout-minigames", "1", "--minigame-steps", "256",
               "--num-envs", "32", "--eval-samples", "2", "--max-minutes", "0.02", "--out", str(out)]
    assert main(options) == 0
    recorded = json.loads((out / "player.json").read_text())
    assert recorded == {"player": f"file:{weights}", "player_weights": weights_digest(f"file:{weights}")}

    weights.write_bytes((SHIPPED_WEIGHTS / "state-rn.pt").read_bytes())  # "retrained": other weights, same spec
    capsys.readouterr()
    for call in (options, [*options, "--evaluate-only"]):
        assert main(call) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith(f"universal adversary: {out / 'player.json'}: made against ")
        assert "a retrained player needs another --out" in err
    assert len(json.loads((out / "progress.json").read_text())["calls"]) == 1  # nothing trained against it

    (out / "player.json").unlink()  # a folder from before the record: its player is unknown
    assert main(options) == 2
    assert "begun before runs recorded their player's weights" in capsys.readouterr().err
