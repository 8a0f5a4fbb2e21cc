"""A robustness card folder, written by hand as the spec shows, turned into card.md, card.html, a gallery and a leaderboard.

The card's figures are made up but shaped as `clevr-game evaluate` writes them
(docs/robustness-card.md): two sizes, the state adversary and both baselines, tests
with Holm-corrected p, families. Its two manipulations move objects of the first
real CLEVR val scene by a fraction of a unit.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks.card.card_gallery import choose, read_manipulations
from benchmarks.card.leaderboard import build_leaderboard
from benchmarks.card.pages import read_card, render_card_html, render_card_markdown, write_pages
from clevr_game.errors import InputError
from clevr_game.scene import parse_scene

PNG = b"\x89PNG\r\n\x1a\n"
HEADLINE = ("accuracy 0.600 [0.537, 0.660] · blind 0.400 · from input 0.200 · drop 0.031 (state) "
            "· random valid 0.004")


def _summary(values: list[float], low: float, high: float) -> dict:
    return {"mean": float(np.mean(values)), "low": low, "high": high, "per_minigame": values}


def make_card(spec: str = "state-rn", clean: float = 0.6, protocol: str = "clevr-robust-v1") -> dict:
    size = lambda n, m, drops: {  # noqa: E731
        "size": n, "minigames": m, "seeds": 1, "steps": 500 * n,
        "adversaries": {name: {"drop": _summary(d, max(0.0, min(d) - 0.01), max(d) + 0.01),
                               "consistency": _summary([1 - x for x in d], 0.9, 1.0)}
                        for name, d in drops.items()}}
    return {
        "protocol": protocol, "budget": "quick", "seed": 0,
        "player": {"spec": spec, "weights": "3f2a9c1d", "needs": ["scene"], "image": None},
        "items": 240,
        "clean_accuracy": {"value": clean, "low": round(clean - 0.063, 3), "high": round(clean + 0.06, 3),
                           "correct": round(240 * clean), "answered": 240},
        "blind_accuracy": {"value": 0.4, "low": 0.34, "high": 0.46, "correct": 96, "answered": 240},
        "from_input": round(clean - 0.4, 6),
        "drop": 0.031, "drop_adversary": "state", "random_valid_drop": 0.004, "search_drop": 0.02,
        "adversaries": {"state": {"drop": 0.031, "consistency": 0.95}, "search": {"drop": 0.02, "consistency": 0.97},
                        "random_valid": {"drop": 0.004, "consistency": 0.99}},
        "sizes": [size(100, 2, {"random_valid": [0.0, 0.01], "state": [0.02, 0.03], "search": [0.02, 0.02]}),
                  size(10, 4, {"state": [0.1, 0.0, 0.0, 0.0], "search": [0.0, 0.1, 0.0, 0.0],
                               "random_valid": [0.0, 0.0, 0.0, 0.0]})],
        "tests": [
            {"name": "state vs random valid, size 10", "test": "exact Wilcoxon signed-rank", "n": 4,
             "statistic": 1.0, "p": 0.0123, "p_holm": 0.0369, "significant": True},
            {"name": "state vs random valid, size 100", "test": "exact Wilcoxon signed-rank", "n": 2,
             "statistic": 3.0, "p": 0.5, "p_holm": 1.0, "significant": False},
            {"name": "state size trend", "test": "exact permutation Jonckheere-Terpstra", "n": 6,
             "statistic": 4.0, "p": 0.8, "p_holm": 1.0, "significant": False},
        ],
        "families": [{"family": "compare_integer", "items": 31, "drop": 0.05, "random_valid_drop": 0.0},
                     {"family": "zero_hop", "items": 40, "drop": 0.025, "random_valid_drop": 0.01}],
        "worst_minigame": {"size": 10, "minigame": 0, "adversary": "state", "drop": 0.1},
        "evaluation_errors": {"queries": 1920, "errors": 3, "rate": 3 / 1920},
        "unscored_items": 1,
        "manipulations": 2,
        "gallery": [],
        "seconds": 181.2,
    }


def _record(scene: dict, question: dict, adversary: str, moves: list[list], new_answer: str, item: str) -> dict:
    before = parse_scene(scene)
    coords = before.coords()
    for obj, dx, dy in moves:
        coords[obj, :2] += (dx, dy)
    after = before.with_coords(coords)
    return {"item_id": item, "adversary": adversary, "size": 10, "minigame": 0, "seed": 0,
            "question": {**question, "template_filename": "compare_integer.json"},
            "original_scene": scene, "moved_scene": after.to_json(), "moves": moves,
            "moved_objects": sorted({m[0] for m in moves if m[1] or m[2]}), "true_answer": question["answer"],
            "old_answer": question["answer"], "new_answer": new_answer}


@pytest.fixture
def records(clevr_real: Path) -> list[dict]:
    scene = json.loads((clevr_real / "CLEVR_val_scenes_500.json").read_text())["scenes"][0]
    questions = json.loads((clevr_real / "CLEVR_val_questions_sample9.json").read_text())["questions"]
    return [
        # Two objects moved: shown after the one-object manipulation.
        _record(scene, questions[3], "state", [[4, -0.3, 0.0], [2, 0.0, 0.3]], "no", "0:3"),
        # Object 1 stays (the stay bin): not a moved object, so this one moves one object.
        _record(scene, questions[5], "search", [[0, 0.3, 0.0], [1, 0.0, 0.0]], "3", "0:5"),
    ]


def write_folder(folder: Path, card: dict, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "card.json").write_text(json.dumps(card, indent=1))
    (folder / "manipulations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


# ------------------------------------------------------------------ the card's pages


def test_the_pages_show_the_card_figures_tests_and_families(tmp_path, records):
    # As for an image player: the two PNGs it saw.
    records[1] |= {"original_image": "images/seen before.png", "moved_image": "images/seen-after.png"}
    folder = write_folder(tmp_path / "card", make_card(), records)
    gallery = write_pages(folder, gallery_preset="schematic")
    assert gallery == ["gallery/manipulation_0.png", "gallery/manipulation_1.png"]
    assert all((folder / path).read_bytes().startswith(PNG) for path in gallery)
    md, page = (folder / "card.md").read_text(), (folder / "card.html").read_text()
    for text in (md, page):
        assert "Robustness card: state-rn" in text and "protocol clevr-robust-v1, budget quick, seed 0" in text
        assert HEADLINE in text
        assert "0.600 [0.537, 0.660]: 144 right of 240 answered, of 240 items" in text
        assert "3 of 1920 queries failed (0.16%)" in text
        assert "size 10, mini-game 0: drop 0.100 under the state adversary" in text
        assert "3.0 minutes" in text and "manipulations.jsonl" in text
    # Per size, sizes ascending, the trained adversary before the baselines; the tests with raw and Holm p.
    assert "| 10 | state | 0.025 [0.000, 0.110] | 0.975 [0.900, 1.000] | 4 × 1 seed, 5000 steps |" in md
    assert md.index("| 10 | state") < md.index("| 10 | random valid") < md.index("| 100 | state")
    assert ("| state vs random valid, size 10 | exact Wilcoxon signed-rank | 4 | 1 | 0.0123 | 0.0369 | yes |"
            in md)
    assert "| state size trend | exact permutation Jonckheere-Terpstra | 6 | 4 | 0.8 | 1 | no |" in md
    assert "<td>state vs random valid, size 10</td><td>exact Wilcoxon signed-rank</td><td>4</td><td>1</td>" in page
    assert "<td>0.0123</td><td>0.0369</td><td>yes</td>" in page
    assert "| compare_integer | 31 | 0.050 | 0.000 |" in md and "<td>compare_integer</td><td>31</td>" in page
    assert "Significant after Holm's correction" in md and "state vs random valid, size 10." in page
    assert "[manipulations.jsonl](manipulations.jsonl)" in md
    assert "![manipulation 0](gallery/manipulation_0.png)" in md
    # The gallery: the one-object manipulation first, with its question and answers.
    assert page.index('src="gallery/manipulation_0.png"') < page.index('src="gallery/manipulation_1.png"')
    first = page[page.index('src="gallery/manipulation_0.png"'):]
    assert "What number of other objects are the same size as the purple shiny object?" in first.split("</figure>")[0]
    assert "search adversary, size 10" in first.split("</figure>")[0]
    assert "moved: large brown rubber cylinder (0)\n" in first.split("</figure>")[0]
    assert 'what the player saw: <a href="images/seen%20before.png">before</a>, ' \
        '<a href="images/seen-after.png">after</a>' in first.split("</figure>")[0]
    assert "schematic top views" in page


def test_the_same_card_gives_byte_identical_pages(tmp_path, records):
    folder = write_folder(tmp_path / "card", make_card(), records)
    write_pages(folder, gallery_preset="schematic")
    first = [(folder / name).read_bytes() for name in ("card.md", "card.html")]
    write_pages(folder, gallery_preset="schematic")
    assert [(folder / name).read_bytes() for name in ("card.md", "card.html")] == first
    card = make_card()
    assert render_card_markdown(card) == render_card_markdown(copy.deepcopy(card))
    assert render_card_html(card, []) == render_card_html(copy.deepcopy(card), [])


def test_a_hostile_player_spec_and_question_show_as_text(tmp_path, records):
    spec = "subprocess:<script>alert('x')</script> | [a](javascript:x)"
    records[1]["question"]["question"] = "<img src=x onerror=alert(1)>?"
    records[1] |= {"original_image": "javascript:alert(1)", "moved_image": "images/after.png"}
    folder = write_folder(tmp_path / "card", make_card(spec=spec), records)
    write_pages(folder, gallery_preset="schematic")
    md, page = (folder / "card.md").read_text(), (folder / "card.html").read_text()
    assert "<script" not in page and "<img src=x" not in page and "javascript:alert" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page and "&lt;img src=x onerror" in page
    # Every < of the spec is escaped, so no tag; `](` is broken, so no link.
    assert re.search(r"(?<!\\)<", md) is None and "\\<script>" in md and "[a]\\(javascript:x)" in md
    assert "\\| [a]" in md  # a pipe in the spec does not split a table cell


def test_a_player_that_answers_from_the_question_alone_is_called_so():
    card = make_card(clean=0.42)
    md = render_card_markdown(card)
    assert "from input 0.020" in md and "answers from the question alone" in md and "says little" in md
    assert "answers from the question alone" not in render_card_markdown(make_card())


def test_bad_folders_are_refused_in_one_line(tmp_path, records):
    folder = write_folder(tmp_path / "card", make_card(), records)
    with pytest.raises(InputError, match="unknown gallery preset 'fancy'"):
        write_pages(folder, gallery_preset="fancy")
    (folder / "manipulations.jsonl").write_text(json.dumps(records[0]) + "\n{not json\n")
    with pytest.raises(InputError, match=r"manipulations.jsonl: line 2: not JSON") as caught:
        write_pages(folder, gallery_preset="schematic")
    assert "\n" not in str(caught.value)
    (folder / "manipulations.jsonl").unlink()
    with pytest.raises(InputError, match="no manipulations file"):
        write_pages(folder, gallery_preset="schematic")


def test_the_gallery_takes_distinct_items_fewer_moved_objects_first(tmp_path, records):
    again = {**records[0], "adversary": "random_valid", "moves": [[4, -0.3, 0.0]]}
    folder = write_folder(tmp_path / "card", make_card(), [*records, again])
    chosen = choose(read_manipulations(folder / "manipulations.jsonl"), 6)
    assert [(r["item_id"], r["adversary"]) for r in chosen] == [("0:3", "random_valid"),
                                                                ("0:5", "search")]
    assert len(choose(read_manipulations(folder / "manipulations.jsonl"), 1)) == 1
    # A smaller gallery leaves no picture of a bigger one behind.
    write_pages(folder, gallery_preset="schematic")
    assert write_pages(folder, gallery_preset="schematic", gallery_size=1) == ["gallery/manipulation_0.png"]
    assert sorted(p.name for p in (folder / "gallery").iterdir()) == ["manipulation_0.png"]


@pytest.mark.slow
@pytest.mark.usefixtures("own_render_cache")
def test_the_gallery_renders_both_scenes_with_blender(tmp_path, records):
    from clevr_game.render import read_png

    folder = write_folder(tmp_path / "card", make_card(), records)
    gallery = write_pages(folder, gallery_preset="fast", gallery_size=1)
    page = (folder / "card.html").read_text()
    assert gallery == ["gallery/manipulation_0.png"] and "schematic" not in page
    assert "Blender could not render" not in page
    pixels = read_png(folder / gallery[0])
    # Two rendered 480 x 320 views side by side with titles: wider than one view, taller than it.
    assert pixels.shape[1] >= 960 and pixels.shape[0] > 320


# ------------------------------------------------------------------ the leaderboard


def test_the_leaderboard_sorts_links_and_notes(tmp_path, records):
    dirs = [write_folder(tmp_path / "cards" / name, make_card(spec=name, clean=clean), records)
            for name, clean in (("blind", 0.41), ("oracle", 0.99), ("zeta", 0.6), ("alpha", 0.6))]
    out = tmp_path / "board"
    table = build_leaderboard(dirs, out)
    lines = table.splitlines()
    assert lines[0].startswith("| player | budget | clean accuracy | blind | from input | drop |")
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| oracle", "| alpha", "| zeta", "| blind"]
    assert "| alpha | quick | 0.600 [0.537, 0.660] | 0.400 | 0.200 | 0.031 (state) | 0.004 | 0.020 | 3/1920 | 1 | 2 |" \
        " [card](../cards/alpha/card.html) |" in lines
    assert "| 0.010 † |" in lines[-1]
    md, page = (out / "leaderboard.md").read_text(), (out / "leaderboard.html").read_text()
    assert table in md and "answers from the question alone" in md and "# Leaderboard: clevr-robust-v1" in md
    assert page.index("<td>oracle<") < page.index("<td>alpha<") < page.index("<td>zeta<") < page.index("<td>blind<")
    assert '<a href="../cards/alpha/card.html">card</a>' in page
    assert build_leaderboard(list(reversed(dirs)), out) == table


def test_the_leaderboard_refuses_a_bad_card_in_one_line(tmp_path, records):
    good = write_folder(tmp_path / "good", make_card(), records)
    broken = write_folder(tmp_path / "broken", make_card(), records)
    (broken / "card.json").write_text('{"protocol": "clevr-robust-v1", "player": ')
    for bad in (broken, tmp_path / "nowhere"):
        with pytest.raises(InputError) as caught:
            build_leaderboard([good, bad], tmp_path / "board")
        assert str(bad / "card.json") in str(caught.value) and "\n" not in str(caught.value)
    partial = make_card()
    del partial["drop"]
    (broken / "card.json").write_text(json.dumps(partial))
    with pytest.raises(InputError, match=r"broken/card.json: not a robustness card: no 'drop'"):
        build_leaderboard([good, broken], tmp_path / "board")
    other = write_folder(tmp_path / "other", make_card(protocol="clevr-robust-v2"), records)
    with pytest.raises(InputError, match="cards of different protocols") as caught:
        build_leaderboard([good, other], tmp_path / "board")
    assert "clevr-robust-v2" in str(caught.value) and "\n" not in str(caught.value)
    assert read_card(good / "card.json")["protocol"] == "clevr-robust-v1"
    assert not (tmp_path / "board" / "leaderboard.md").exists()
