"""card.md and card.html from a card folder (card.json, manipulations.jsonl), with the gallery.

Both pages are rendered from one view of the card (`card_view`), so they show the
same figures, formatted once. Everything on them comes from the card: the same
card gives byte-identical pages (no date; the run's length is card["seconds"]).
Markdown cells escape what Markdown would read as markup, and the HTML templates
autoescape, so a hostile player spec or question shows as text.
"""

from __future__ import annotations

import json
import math
import os
import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from benchmarks.card.card_gallery import (
    GALLERY_PRESETS,
    MANIPULATIONS_FILE,
    draw_card_gallery,
    read_manipulations,
)
from benchmarks.gallery import GALLERY_SIZE, SCHEMATIC
from clevr_game.atomic import write_text_atomic
from clevr_game.errors import InputError, one_line

CARD_FILE = "card.json"
LOW_FROM_INPUT = 0.05
"""Below this from-input a player answers (almost) from the question alone, and its drop says little."""
SIGNIFICANCE = 0.05
ADVERSARY_ORDER = ("state", "pixel", "search", "random_valid")
_CONTRACT_NUMBERS = ("drop", "random_valid_drop", "search_drop")
_ACCURACIES = ("clean_accuracy", "blind_accuracy")
_MD_SPECIAL = re.compile(r"[\\|<]")


# ------------------------------------------------------------------ reading a card


def read_card(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A card.json as a dict; InputError (one line, naming the file) when it is missing or malformed.

    Only the contract keys (docs/robustness-card.md) are required; every other field
    shows as n/a when absent.
    """
    path = Path(path)
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no card here (write one with `clevr-game evaluate --out {path.parent}`)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not a readable JSON card ({one_line(exc, 120)})") from None
    if not isinstance(card, dict):
        raise InputError(f"{path}: a card is a JSON object, got {type(card).__name__}")
    missing = [key for key in ("protocol", "player", *_ACCURACIES, *_CONTRACT_NUMBERS, "evaluation_errors",
                               "unscored_items", "seconds") if key not in card]
    if missing:
        raise InputError(f"{path}: not a robustness card: no {', '.join(repr(k) for k in missing)}")
    if not isinstance(card["protocol"], str):
        raise InputError(f"{path}: 'protocol' must be a string")
    if not isinstance(card["player"], dict) or not isinstance(card["player"].get("spec"), str):
        raise InputError(f"{path}: 'player' must be an object with a string 'spec'")
    for key in _ACCURACIES:
        if not isinstance(card[key], dict) or not all(_number_or_null(card[key].get(f)) for f in ("value", "low", "high")):
            raise InputError(f"{path}: {key!r} must be an object with numbers 'value', 'low' and 'high'")
    # A null drop is a card whose player answered nothing right: shown as n/a, not refused.
    for key in (*_CONTRACT_NUMBERS, "seconds", "unscored_items"):
        if not _number_or_null(card[key]):
            raise InputError(f"{path}: {key!r} must be a number, got {one_line(repr(card[key]), 40)}")
    errors = card["evaluation_errors"]
    if not isinstance(errors, dict) or not all(_number_or_null(errors.get(f)) for f in ("queries", "errors")):
        raise InputError(f"{path}: 'evaluation_errors' must be an object with numbers 'queries' and 'errors'")
    return card


def _mapping(value: Any) -> dict:
    """`value` if it is a JSON object, else empty: a malformed optional field shows as n/a, not a traceback."""
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict]:
    """The JSON objects of a list field (rows of tests, families, sizes); anything else is skipped."""
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _number_or_null(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


# ------------------------------------------------------------------ cells


def number(value: Any, digits: int = 3) -> str:
    """`value` with `digits` decimals; n/a for anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}"


def interval(summary: Any) -> str:
    """`m [low, high]` of a summary with `value` (an accuracy) or `mean` (a per-size figure)."""
    if not isinstance(summary, dict):
        return "n/a"
    centre = number(summary.get("value", summary.get("mean")))
    low, high = summary.get("low"), summary.get("high")
    if number(low) == "n/a" or number(high) == "n/a":
        return centre
    return f"{centre} [{number(low)}, {number(high)}]"


def p_text(value: Any) -> str:
    return number(value) if number(value) == "n/a" else f"{value:.3g}"


def adversary_name(name: str) -> str:
    """`random_valid` -> `random valid`: the card's keys as words."""
    return str(name).replace("_", " ")


def adversaries_in_order(names: Any) -> list[str]:
    """The card's adversaries, the trained ones first and the baselines last, whatever the JSON order."""
    known = [name for name in ADVERSARY_ORDER if name in names]
    return known + sorted(str(name) for name in names if name not in ADVERSARY_ORDER)


def markdown_text(value: Any) -> str:
    """`value` as literal Markdown text on one line (a table cell is one line).

    Only what could change the page is escaped: `|` (a new cell), `<` (raw HTML,
    a script), `](` (a link or image) and the backslash itself; emphasis stays, so
    `compare_integer` and `[0.5, 0.7]` read as they are.
    """
    return _MD_SPECIAL.sub(r"\\\g<0>", " ".join(str(value).split())).replace("](", "]\\(")


def link_target(relative: str) -> str:
    """A relative path as a link target (spaces and parentheses percent-encoded, slashes kept)."""
    return quote(relative.replace(os.sep, "/"))


def errors_text(errors: Any) -> str:
    """`e of q queries failed (r%)` from evaluation_errors."""
    if not isinstance(errors, dict):
        return "n/a"
    queries, failed = errors.get("queries"), errors.get("errors")
    if number(queries) == "n/a" or number(failed) == "n/a":
        return "n/a"
    rate = f" ({failed / queries:.2%})" if queries else ""
    return f"{int(failed)} of {int(queries)} queries failed{rate}"


# ------------------------------------------------------------------ the view both pages show


def headline(card: dict) -> str:
    """`accuracy A [lo, hi] · blind B · from input F · drop D (adversary) · random valid R`."""
    return (f"accuracy {interval(card['clean_accuracy'])} · blind {number(card['blind_accuracy'].get('value'))} "
            f"· from input {number(card.get('from_input'))} · drop {number(card['drop'])} "
            f"({adversary_name(card.get('drop_adversary', 'n/a'))}) · random valid {number(card['random_valid_drop'])}"
            + _relative(card.get("relative_to_random_valid")))


def _relative(relative: Any) -> str:
    """` (N x random valid)` when the card has a ratio, else nothing."""
    if not isinstance(relative, dict) or not _number_or_null(relative.get("ratio")) or relative.get("ratio") is None:
        return ""
    return f" ({relative['ratio']:.1f} x random valid)"


def card_view(card: dict) -> dict[str, Any]:
    """What card.md and card.html show, every figure already a string."""
    player = card["player"]
    image = player.get("image")
    clean, blind = card["clean_accuracy"], card["blind_accuracy"]
    adversaries = _mapping(card.get("adversaries"))
    size_rows = []
    for size in sorted(_dicts(card.get("sizes")), key=_size_order):
        played = (f"{size.get('minigames', 'n/a')} × {size.get('seeds', 'n/a')} seed"
                  f"{'' if size.get('seeds') == 1 else 's'}, {size.get('steps', 'n/a')} steps")
        per = _mapping(size.get("adversaries"))
        for name in adversaries_in_order(per):
            figures = _mapping(per[name])
            size_rows.append([str(size.get("size", "n/a")), adversary_name(name), interval(figures.get("drop")),
                              interval(figures.get("consistency")), played])
    tests = _dicts(card.get("tests"))
    test_rows = [[str(t.get("name", "")), str(t.get("test", "")), str(t.get("n", "n/a")),
                  "n/a" if number(t.get("statistic")) == "n/a" else f"{t['statistic']:.4g}",
                  p_text(t.get("p")), p_text(t.get("p_holm")), "yes" if t.get("significant") else "no"]
                 for t in tests]
    family_rows = [[str(f.get("family", "")), str(f.get("items", "n/a")), number(f.get("drop")),
                    number(f.get("random_valid_drop"))] for f in _dicts(card.get("families"))]
    worst = card.get("worst_minigame")
    return {
        "title": f"Robustness card: {player['spec']}",
        "subtitle": f"protocol {card['protocol']}, budget {card.get('budget', 'n/a')}, seed {card.get('seed', 'n/a')}",
        "headline": headline(card),
        "player": [
            ("spec", player["spec"]),
            ("weights", str(player.get("weights") or "none given")),
            ("needs", ", ".join(str(n) for n in player.get("needs") or []) or "n/a"),
            ("image", f"{image.get('preset')} preset, {image.get('width')} × {image.get('height')}"
             if isinstance(image, dict) else "none (the player reads the scene)"),
        ],
        "clean": f"{interval(clean)}: {clean.get('correct', 'n/a')} right of {clean.get('answered', 'n/a')} "
                 f"answered, of {card.get('items', 'n/a')} items (Wilson 95% interval)",
        "blind": f"{interval(blind)}: the same questions, each asked about another item's scene",
        "adversary_rows": [[adversary_name(name), number(_mapping(adversaries[name]).get("drop")),
                            number(_mapping(adversaries[name]).get("consistency"))]
                           for name in adversaries_in_order(adversaries)],
        "size_rows": size_rows,
        "test_rows": test_rows,
        "family_rows": family_rows,
        "worst": (f"size {worst.get('size')}, mini-game {worst.get('minigame')}: drop {number(worst.get('drop'))} "
                  f"under the {adversary_name(worst.get('adversary', 'n/a'))} adversary")
                 if isinstance(worst, dict) else "n/a",
        "errors": errors_text(card["evaluation_errors"]),
        "unscored": "n/a" if card["unscored_items"] is None else card["unscored_items"],
        "meaning": meaning(card),
        "manipulations": card.get("manipulations", "n/a"),
        "manipulations_file": MANIPULATIONS_FILE,
        "minutes": f"{card['seconds'] / 60:.1f}" if number(card["seconds"]) != "n/a" else "n/a",
        "gallery_images": [str(image) for image in card.get("gallery") or []],
    }


def _size_order(size: dict) -> tuple[bool, float]:
    """Smaller sizes first; a size that is not a number last."""
    known = number(size.get("size")) != "n/a"
    return (not known, size["size"] if known else 0.0)


def meaning(card: dict) -> list[str]:
    """The "what this means" paragraphs: what the headline says about this player, and what it cannot."""
    from_input, drop = card.get("from_input"), card["drop"]
    adversary = adversary_name(card.get("drop_adversary", "n/a"))
    paragraphs = []
    if number(from_input) != "n/a" and from_input < LOW_FROM_INPUT:
        paragraphs.append(
            f"From input is {number(from_input)}: the player is about as accurate on another item's scene "
            f"(blind {number(card['blind_accuracy'].get('value'))}) as on its own, so it answers from the "
            "question alone. Few of its right answers depend on the scene, so its drop "
            f"({number(drop)}) says little about robustness: a move has little to break.")
    else:
        paragraphs.append(
            f"Of the clean accuracy {number(card['clean_accuracy'].get('value'))}, {number(from_input)} comes "
            f"from the input; the other {number(card['blind_accuracy'].get('value'))} (blind) the player gets "
            "from the question alone. Under the strongest adversary, "
            f"{adversary}, a share {number(drop)} of the items went from right to wrong after one move that keeps "
            f"the true answer; under random valid moves, {number(card['random_valid_drop'])}.")
    tests = _dicts(card.get("tests"))
    significant = [str(t.get("name", "")) for t in tests if t.get("significant")]
    if significant:
        paragraphs.append(f"Significant after Holm's correction (corrected p below {SIGNIFICANCE}): "
                          f"{'; '.join(significant)}. Every other difference may be chance.")
    elif tests:
        paragraphs.append(f"None of the {len(tests)} tests is significant after Holm's correction: with "
                          "these mini-games no adversary is shown to beat random valid moves, and no size trend "
                          "is shown.")
    errors, unscored = card["evaluation_errors"], card["unscored_items"]
    if (errors.get("errors") or 0) > 0 or (unscored or 0) > 0:
        paragraphs.append(f"{errors_text(errors)}; {unscored} item{'' if unscored == 1 else 's'} got no answer "
                          "on a moved scene: unscored, never counted as unchanged.")
    return paragraphs


# ------------------------------------------------------------------ templates


@cache
def environment() -> jinja2.Environment:
    """The card's templates: HTML ones autoescaped, Markdown ones escaped by the `md` filter."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["md"] = markdown_text
    env.filters["href"] = link_target
    return env


def render_card_markdown(card: dict) -> str:
    """card.md: the card's figures as Markdown (the gallery as image links, if the card lists one)."""
    return environment().get_template("card.md.j2").render(view=card_view(card))


def render_card_html(card: dict, gallery: list[dict], *, gallery_note: str | None = None) -> str:
    """card.html: the same figures as card.md, and the gallery with its captions (`draw_card_gallery`'s entries)."""
    return environment().get_template("card.html.j2").render(view=card_view(card), gallery=gallery,
                                                              gallery_note=gallery_note)


# ------------------------------------------------------------------ the folder


def write_pages(folder: str | os.PathLike[str], *, gallery_preset: str = "balanced",
                gallery_size: int = GALLERY_SIZE) -> list[str]:
    """Draw folder/gallery/ and write folder/card.md and card.html; returns the gallery's paths relative to folder.

    :param folder: a card folder, with card.json and manipulations.jsonl.
    :param gallery_preset: a render preset, or `schematic` for top views without Blender.
    :param gallery_size: at most this many manipulations, each of another item.
    """
    if gallery_preset not in GALLERY_PRESETS:
        raise InputError(f"unknown gallery preset {gallery_preset!r} (expected one of {', '.join(GALLERY_PRESETS)})")
    if isinstance(gallery_size, bool) or not isinstance(gallery_size, int) or gallery_size < 0:
        raise InputError(f"gallery size must be a whole number >= 0, got {gallery_size!r}")
    folder = Path(folder)
    card = read_card(folder / CARD_FILE)
    records = read_manipulations(folder / MANIPULATIONS_FILE)
    entries, note = draw_card_gallery(folder, records, card["player"]["spec"], gallery_preset, gallery_size)
    if gallery_preset == SCHEMATIC and entries:
        note = "The gallery shows schematic top views (preset schematic), not Blender renders."
    images = [entry["image"] for entry in entries]
    # The caller puts these paths in card.json; the pages show them already.
    shown = {**card, "gallery": images}
    write_text_atomic(folder / "card.md", render_card_markdown(shown))
    write_text_atomic(folder / "card.html", render_card_html(shown, entries, gallery_note=note))
    return images
