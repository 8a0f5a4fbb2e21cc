"""CLEVR-POC players and `poc eval`: set scores, the oracle's 1.0, parsers and perception that learn.

Answers are re-checked with the independent clingo encoding of
tests/test_asp_oracle.py wherever a test says "fresh clingo".
"""

from __future__ import annotations

import pytest

from clevr_game.asp.metrics import exact_accuracy, jaccard, mean_jaccard
from clevr_game.cli import main
from envs.items import load_items
from players.protocol import Answer, Player


@pytest.fixture(scope="module")
def poc_folder(tmp_path_factory: pytest.TempPathFactory):
    from clevr_game.asp.dataset import generate_poc_dataset

    folder = tmp_path_factory.mktemp("poc")
    generate_poc_dataset(folder, 2, 16, seed=5)
    return folder


@pytest.fixture(scope="module")
def items(poc_folder):
    return load_items(poc_folder)


# ---------------------------------------------------------------- scores and poc eval


def test_exact_and_jaccard_on_hand_made_sets():
    true = [["blue", "red"], ["cube"], ["large", "small"], ["metal"]]
    predicted = [["red", "blue"], ["cube", "cone"], ["medium"], ["metal"]]
    assert jaccard(["red", "blue"], ["blue", "red"]) == 1.0
    assert jaccard(["cube", "cone"], ["cube"]) == 0.5
    assert jaccard(["medium"], ["large", "small"]) == 0.0
    assert exact_accuracy(predicted, true) == 0.5
    assert mean_jaccard(predicted, true) == pytest.approx((1 + 0.5 + 0 + 1) / 4)


class SetPlayer(Player):
    """Answers each item from a table (item id -> set text, or None for an error answer)."""

    name = "table"
    needs = frozenset({"scene"})

    def __init__(self, table: dict[str, str | None]):
        self.table = table

    def answer_batch(self, queries):
        return [Answer(q.item_id, self.table[q.item_id]) if self.table[q.item_id] is not None
                else Answer.failed(q.item_id, "table: no answer") for q in queries]


def test_poc_eval_scores_every_attribute_and_counts_errors(items, poc_folder):
    from players.poc.evaluation import evaluate_poc_player

    chosen = items[:4]
    table: dict[str, str | None] = {it.item_id: it.answer for it in items}
    first = chosen[0].answer.split(",")
    # Item 0: one value of its set dropped (or a wrong one added); item 1: an error answer.
    table[chosen[0].item_id] = ",".join(first[:-1]) if len(first) > 1 else first[0]
    if len(first) == 1:
        other = next(o for it in items for o in it.answer.split(",")
                     if it.extra["query_attribute"] == chosen[0].extra["query_attribute"] and o not in first)
        table[chosen[0].item_id] = ",".join(sorted([first[0], other]))
    table[chosen[1].item_id] = None
    result = evaluate_poc_player(SetPlayer(table), poc_folder, limit=4)
    expected_first = jaccard(table[chosen[0].item_id].split(","), first)
    assert result.errors == 1 and result.total == 4
    assert result.exact_accuracy() == 0.5
    assert result.mean_jaccard() == pytest.approx((expected_first + 0 + 1 + 1) / 4)
    assert result.lines()[-1] == f"exact: 0.5000 jaccard: {(expected_first + 2) / 4:.4f}"


def test_poc_eval_with_the_oracle_is_exact(poc_folder, capsys):
    assert main(["poc", "eval", "--player", "oracle", "--items", str(poc_folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "exact: 1.0000 jaccard: 1.0000"
    assert any(line.startswith("all ") and line.split()[1] == "16" for line in lines)
    assert sum(int(line.split()[1]) for line in lines[1:5] if line.split()[0] in ("size", "color", "material", "shape")) == 16
