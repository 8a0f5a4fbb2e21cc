"""A failed answer is never robustness: the evaluation's own errors make items unscored or fail the run.

The hostile player here answers every original scene right and every moved scene
wrong, except that on half of the items (chosen by a hash of the id) it answers
a moved scene with an error instead: it errs exactly when it is fooled. Before
the evaluation kept its own error account, those items counted as unchanged and
such a player read as robust.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from clevr_game.cli import main
from clevr_game.generate import generate_dataset
from envs.game import Outcome
from envs.play import summarise

FOOLED_OR_ERRS = textwrap.dedent("""
    import hashlib, json, sys
    from envs.items import load_items
    items = {it.item_id: it for it in load_items(sys.argv[1])}
    for line in sys.stdin:
        query = json.loads(line)
        item = items[query["id"]]
        coords = [o["3d_coords"] for o in query["scene"]["objects"]]
        moved = coords != [list(o.coords) for o in item.scene.objects]
        errs = hashlib.sha256(item.item_id.encode()).digest()[0] % 2 == 0
        if not moved:
            reply = {"id": query["id"], "answer": item.answer}
        elif errs:
            reply = {"id": query["id"], "error": "fooled, and says so by failing"}
        else:
            reply = {"id": query["id"], "answer": "no" if item.answer != "no" else "yes"}
        print(json.dumps(reply), flush=True)
""")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("fooled-or-errs")
    generate_dataset(root / "items", 20, 3, seed=0, progress=False)
    script = root / "player.py"
    script.write_text(FOOLED_OR_ERRS)
    return root, f"subprocess:{sys.executable} {script} {root / 'items'}"


def _attack(root, spec, out, *extra):
    return main(["attack", "--player", spec, "--items", str(root / "items"), "--minigame-size", "10",
                 "--steps", "256", "--num-envs", "64", "--eval-samples", "8", "--out", str(out),
                 "--no-progress", *extra])


def _errs(item_id: str) -> bool:
    import hashlib

    return hashlib.sha256(item_id.encode()).digest()[0] % 2 == 0


def test_items_whose_evaluation_moves_errored_are_unscored_not_unchanged(hostile, tmp_path, capsys):
    root, spec = hostile
    out = tmp_path / "run"
    # Tolerate every error, so the scores themselves are what is checked.
    assert _attack(root, spec, out, "--max-error-rate", "1", "--max-player-failures", "0") == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    result = json.loads((out / "result.json").read_text())
    items = result["items"]
    unscored = [r for r in items if r["player_errors"]]
    scored = [r for r in items if not r["player_errors"]]
    assert unscored and all(_errs(r["item_id"]) for r in unscored)
    assert result["unscored_items"] == len(unscored) and result["items_counted"] == len(scored)
    assert result["eval_player_errors"] == sum(r["player_errors"] for r in items) > 0
    assert result["eval_queries"] == sum(r["queries"] for r in items) >= result["eval_player_errors"]
    # The shares are over the scored items alone; every answered move of this player flips.
    assert result["consistency"] == pytest.approx(sum(r["changed_share"] for r in scored) / len(scored))
    assert all(r["changed_share"] == r["dropped_share"] for r in scored)
    assert result["clean_accuracy"] == 1.0
    assert last == (f"consistency: {result['consistency']:.4f} drop: {result['drop']:.4f} "
                    f"unscored: {len(unscored)} eval-errors: {result['eval_player_errors']}/{result['eval_queries']} "
                    "accuracy: 1.0000")


def test_attack_fails_with_one_line_when_the_evaluation_errs_too_often(hostile, tmp_path, capsys):
    root, spec = hostile
    assert _attack(root, spec, tmp_path / "run", "--max-player-failures", "0") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("clevr-game: error: ") and "--max-error-rate" in err[0]
    assert json.loads((tmp_path / "run" / "result.json").read_text())["failed"]


def _outcome(item: str, true: str, old: str, new: str | None, *, valid: bool = True,
             error: str | None = None) -> Outcome:
    changed = valid and error is None and new != old
    return Outcome(item, valid, [], true, old, new if valid else None, 0.0, [(0, 0.3, 0.0)] if valid else [],
                   player_error=error, changed=changed, dropped=changed and old == true)


def test_play_line_by_hand():
    # a: right, then broken twice of three; b: wrong, changed once (not a drop); c: right, held, one invalid.
    outcomes = [
        _outcome("a", "2", "2", "3"), _outcome("a", "2", "2", "1"), _outcome("a", "2", "2", "2"),
        _outcome("b", "yes", "no", "yes"), _outcome("b", "yes", "no", "no"), _outcome("b", "yes", "no", "no"),
        _outcome("c", "red", "red", "red"), _outcome("c", "red", "red", "red"),
        _outcome("c", "red", "red", None, valid=False),
    ]
    summary = summarise(outcomes)
    # consistency 3 changed of 9; drop 2 (only a's breaks: b was wrong before); invalid 1 of 9; accuracy 2 of 3.
    assert (summary.changed, summary.dropped, summary.invalid) == (3, 2, 1)
    assert summary.last_line() == "consistency: 0.3333 drop: 0.2222 invalid: 0.1111 accuracy: 0.6667"


def test_play_line_leaves_out_an_item_with_a_failed_answer():
    outcomes = [
        _outcome("a", "2", "2", "3"), _outcome("a", "2", "2", "2"),
        # d would have been fooled; its failed answer must not read as "held"
        _outcome("d", "cube", "cube", "cube"), _outcome("d", "cube", "cube", None, error="timeout"),
    ]
    summary = summarise(outcomes)
    assert summary.unscored_items == 1 and summary.counted == 2
    assert summary.last_line() == "consistency: 0.5000 drop: 0.5000 invalid: 0.0000 unscored: 1 accuracy: 1.0000"
    assert summary.failure(0.05) is not None and summary.failure(0.5) is None


def test_a_search_that_met_failed_answers_certifies_nothing_and_is_unscored(tmp_path):
    from agents.search import SearchAdversary
    from envs.game import Game
    from envs.items import ItemPool, load_items
    from players.oracle import OraclePlayer
    from players.protocol import Answer, Player

    generate_dataset(tmp_path, 2, 1, seed=4, min_objects=1, max_objects=1, progress=False)
    pool = ItemPool(load_items(tmp_path))
    originals = {it.item_id: [o.coords for o in it.scene.objects] for it in pool.items}

    class ErrsWhenMoved(Player):
        needs = OraclePlayer.needs
        name = "errs-when-moved"

        def answer_batch(self, queries):
            right = OraclePlayer().answer_batch(queries)
            return [a if [o.coords for o in q.scene.objects] == originals[q.item_id]
                    else Answer(q.item_id, None, error="fooled, and says so by failing")
                    for q, a in zip(queries, right, strict=True)]

    for player, scored in ((OraclePlayer(), True), (ErrsWhenMoved(), False)):
        search = SearchAdversary(Game(pool, player), budget=100, strategy="exhaustive")
        result = search.attack(0)
        assert result.flipped is None and result.candidates == 48  # one object: every joint move tried
        assert result.scored is scored and result.certified_robust is scored
        assert (result.player_errors > 0) is not scored
