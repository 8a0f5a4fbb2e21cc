"""Shipping a trained file: its held-out figures measured and recorded in `info`, pixel files kept pixel."""

from __future__ import annotations

from pathlib import Path

import players
from clevr_game.generate import generate_dataset
from experiments.finalize_player import _checkpoint_module, main
from players.state.checkpoint import load_player_file, shipped_path
from players.state.evaluation import evaluate_player


def test_each_kind_of_file_is_written_back_by_its_own_checkpoint_module() -> None:
    assert _checkpoint_module(str(shipped_path("pixel-rn.pt"))).__name__ == "players.pixel.checkpoint"
    assert _checkpoint_module(str(shipped_path("film.pt"))).__name__ == "players.pixel.checkpoint"
    assert _checkpoint_module(str(shipped_path("state-rn.pt"))).__name__ == "players.state.checkpoint"


def test_the_shipped_file_carries_the_figures_it_was_measured_at(tmp_path: Path, capsys) -> None:
    heldout, clevr = tmp_path / "heldout", tmp_path / "clevr"
    generate_dataset(heldout, 10, 5, seed=71, progress=False)
    generate_dataset(clevr, 10, 5, seed=72, templates="clevr", progress=False)
    out = tmp_path / "shipped.pt"
    assert main(["--file", str(shipped_path("state-rn.pt")), "--heldout", str(heldout), "--clevr-heldout", str(clevr),
                 "--out", str(out), "--note", "stage=test"]) == 0
    info = load_player_file(out).info
    with players.load(f"file:{out}") as player:
        expected = evaluate_player(player, clevr)
    assert info["clevr_heldout"]["accuracy"] == round(expected.accuracy, 4)
    assert info["clevr_heldout"]["questions"] == info["heldout"]["questions"] == 50
    assert info["stage"] == "test"
    assert capsys.readouterr().out.strip().endswith(f"clevr_heldout {expected.accuracy:.4f}")
