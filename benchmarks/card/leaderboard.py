"""The leaderboard: one row per robustness card, made from the cards (DIR/card.json) and nothing else.

`clevr-game leaderboard DIR... --out FOLDER` writes FOLDER/leaderboard.md and
leaderboard.html. Every card must be of one protocol (its items and budgets), else
the figures would not compare; rows are sorted by clean accuracy, best first, then
by player. Each row links to its card page, relative to FOLDER.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmarks.card.pages import (
    CARD_FILE,
    LOW_FROM_INPUT,
    adversary_name,
    environment,
    interval,
    link_target,
    markdown_text,
    number,
    read_card,
)
from clevr_game.atomic import write_text_atomic
from clevr_game.errors import InputError

HEADER = ["player", "budget", "clean accuracy", "blind", "from input", "drop", "random valid drop",
          "search drop", "errors", "unscored", "manipulations", "card"]
ONLY_QUESTION = "†"
"""Marks a from-input below LOW_FROM_INPUT: the player answers from the question alone."""
NOTES = [
    ("clean accuracy", "accuracy on the protocol's questions, each about its own scene, with its Wilson 95% "
                       "interval."),
    ("blind", "accuracy on the same questions, each asked about another item's scene."),
    ("from input", "clean minus blind: how much of the accuracy comes from the scene or image at all. "
                   f"{ONLY_QUESTION}: below {LOW_FROM_INPUT}, the player answers from the question alone, so "
                   "its drop says little (a move has little to break)."),
    ("drop", "share of items right before a move and wrong after it, under the strongest adversary (named); "
             "an adversary's drop is the mean of its per-size drops."),
    ("random valid drop", "the same under random moves every referee accepts (the floor an adversary must beat)."),
    ("search drop", "the same under greedy search over single-object moves."),
    ("errors", "failed player queries over all queries of the evaluation."),
    ("unscored", "items whose moved scene got no answer; never counted as unchanged."),
    ("manipulations", "distinct moves that made a right answer wrong (the card's manipulations.jsonl)."),
    ("card", "the card page, with the per-size drops, the tests and the gallery."),
]


def _errors_cell(errors: dict) -> str:
    if number(errors.get("errors")) == "n/a" or number(errors.get("queries")) == "n/a":
        return "n/a"
    return f"{int(errors['errors'])}/{int(errors['queries'])}"


def _count(value: Any) -> str:
    return str(int(value)) if number(value) != "n/a" else "n/a"


def leaderboard_row(card: dict, link: str) -> dict[str, Any]:
    """One row: its cells (every column but the link), the relative link, and its sort key."""
    from_input = card.get("from_input")
    only_question = number(from_input) != "n/a" and from_input < LOW_FROM_INPUT
    accuracy = card["clean_accuracy"].get("value")
    cells = [
        card["player"]["spec"], str(card.get("budget", "n/a")), interval(card["clean_accuracy"]),
        number(card["blind_accuracy"].get("value")),
        number(from_input) + (f" {ONLY_QUESTION}" if only_question else ""),
        f"{number(card['drop'])} ({adversary_name(card.get('drop_adversary', 'n/a'))})",
        number(card["random_valid_drop"]), number(card["search_drop"]), _errors_cell(card["evaluation_errors"]),
        _count(card["unscored_items"]), _count(card.get("manipulations")),
    ]
    known = number(accuracy) != "n/a"
    # Best accuracy first, a card without one last; player, budget and link make the order total.
    key = (not known, -accuracy if known else 0.0, card["player"]["spec"], str(card.get("budget")), link)
    return {"cells": cells, "link": link, "key": key}


def read_cards(card_dirs: list[Path]) -> list[tuple[Path, dict]]:
    """(folder, card) per folder; InputError for no folder, one given twice, a bad card, or mixed protocols."""
    if not card_dirs:
        raise InputError("no card folders given (each holds a card.json from `clevr-game evaluate`)")
    cards, seen = [], {}
    for folder in map(Path, card_dirs):
        resolved = folder.resolve()
        if resolved in seen:
            raise InputError(f"{folder}: given twice (also as {seen[resolved]})")
        seen[resolved] = folder
        cards.append((folder, read_card(folder / CARD_FILE)))
    first_folder, first = cards[0]
    for folder, card in cards[1:]:
        if card["protocol"] != first["protocol"]:
            raise InputError(f"cards of different protocols: {first_folder / CARD_FILE} is {first['protocol']!r}, "
                             f"{folder / CARD_FILE} is {card['protocol']!r}; a leaderboard compares one protocol")
    return cards


def _markdown_table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(markdown_text(cell) for cell in row["cells"])
              + f" | [card]({link_target(row['link'])}) |" for row in rows]
    return "\n".join(lines) + "\n"


def build_leaderboard(card_dirs: list[Path], out: Path) -> str:
    """Write out/leaderboard.md and out/leaderboard.html from the cards in `card_dirs`; returns the Markdown table.

    :param card_dirs: card folders, each with a card.json of the same protocol.
    :param out: the folder for the two pages; links to the cards are relative to it.
    """
    out = Path(out)
    cards = read_cards(card_dirs)
    rows = sorted((leaderboard_row(card, os.path.relpath(folder.resolve() / "card.html", out.resolve()))
                   for folder, card in cards), key=lambda row: row["key"])
    table = _markdown_table(rows)
    context = {"protocol": cards[0][1]["protocol"], "header": HEADER, "rows": rows, "notes": NOTES}
    env = environment()
    write_text_atomic(out / "leaderboard.md", env.get_template("leaderboard.md.j2").render(table=table, **context))
    write_text_atomic(out / "leaderboard.html", env.get_template("leaderboard.html.j2").render(**context))
    return table
