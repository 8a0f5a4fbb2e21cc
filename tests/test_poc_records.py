"""`poc eval --records`: one JSON line per item, in item order, that adds up to the printed figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clevr_game.cli import main
from envs.items import load_items
from players.protocol import Answer, Player


@pytest.fixture(scope="module")
def poc_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clevr_game.asp.dataset import generate_poc_dataset

    folder = tmp_path_factory.mktemp("poc-records")
    generate_poc_dataset(folder, 2, 8, seed=7)
    return folder


def read_records(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def printed_figures(out: str) -> tuple[str, str]:
    last = out.splitlines()[-1].split()
    assert last[0] == "exact:" and last[2] == "jaccard:"
    return last[1], last[3]


@pytest.mark.parametrize("player", ["oracle", "poc-state-neuro-symbolic"])
def test_records_add_up_to_the_printed_figures(poc_folder: Path, tmp_path: Path, player: str, capsys) -> None:
    records_file = tmp_path / "records" / f"{player}.jsonl"
    assert main(["poc", "eval", "--player", player, "--items", str(poc_folder), "--limit", "6",
                 "--records", str(records_file)]) == 0
    exact, mean = printed_figures(capsys.readouterr().out)
    rows = read_records(records_file)
    items = load_items(poc_folder)[:6]
    assert [r["item"] for r in rows] == [it.item_id for it in items]
    for row, item in zip(rows, items, strict=True):
        assert row["environment"] == item.environment and row["question"] == item.question
        assert row["answer"] == sorted(item.answer.split(","))
        assert row["exact"] == (row["predicted"] == row["answer"])
        assert isinstance(row["jaccard"], float)
    assert f"{sum(r['exact'] for r in rows) / len(rows):.4f}" == exact
    assert f"{sum(r['jaccard'] for r in rows) / len(rows):.4f}" == mean
    if player == "oracle":
        assert exact == "1.0000" and all("program_right" not in r for r in rows)
    else:
        # The neuro-symbolic player reports its parse: each record says whether the program was right.
        assert all(isinstance(r["program_right"], bool) and r["perception_right"] is None for r in rows)
        assert all(("cause" in r) == (not r["exact"]) for r in rows)


class FailingPlayer(Player):
    """Every answer an error whose message spans lines."""

    name = "failing"
    needs = frozenset({"scene"})

    def answer_batch(self, queries):
        return [Answer.failed(q.item_id, "failing:\nno answer") for q in queries]


def test_an_error_answer_is_one_line_scored_zero(poc_folder: Path) -> None:
    from players.poc.evaluation import evaluate_poc_player

    result = evaluate_poc_player(FailingPlayer(), poc_folder, limit=2, keep_records=True)
    assert [(r["error"], r["exact"], r["jaccard"], "predicted" in r) for r in result.records] == [
        ("failing: no answer", False, 0.0, False)] * 2
    assert evaluate_poc_player(FailingPlayer(), poc_folder, limit=2).records == []
