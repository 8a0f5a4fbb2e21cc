"""Question text: params realised with synonyms, optional words, plural `s`, tidy spacing and articles."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.errors import InputError

DEFAULT_SYNONYMS_PATH = Path(__file__).resolve().parents[1] / "data" / "synonyms.json"

# A relation value reads as a phrase even when a synonyms file leaves it out.
RELATION_PHRASES = {"left": "left of", "right": "right of", "behind": "behind", "front": "in front of"}

Synonyms = Mapping[str, Sequence[str]]

_OPTIONAL = re.compile(r"\[([^\[\]]*)\]")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([?.,;:!])")
_ARTICLE_BEFORE_VOWEL = re.compile(r"\b([Aa]) (?=[aeiouAEIOU])")


def load_synonyms(source: str | Path | Mapping[str, Any] | None = None) -> dict[str, tuple[str, ...]]:
    """A synonyms mapping (word -> phrasings), from a JSON file, a dict, or the project's own file."""
    if source is None:
        source = DEFAULT_SYNONYMS_PATH
    name = "synonyms"
    if isinstance(source, (str, Path)):
        name = Path(source).name
        try:
            source = json.loads(Path(source).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{source}: no such file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{name}: not valid JSON ({exc})".replace("\n", " ")) from None
    if not isinstance(source, Mapping):
        raise InputError(f"{name}: expected a JSON object of word -> list of phrasings")
    synonyms = {}
    for word, phrasings in source.items():
        if (
            not isinstance(phrasings, list | tuple)
            or not phrasings
            or any(not isinstance(p, str) or not p.strip() for p in phrasings)
        ):
            raise InputError(f"{name}: entry {word!r} must be a non-empty list of non-empty strings")
        synonyms[str(word)] = tuple(phrasings)
    return synonyms


def tidy(text: str) -> str:
    """One space between words, none before punctuation, `an` before a vowel, a capital first letter."""
    text = " ".join(text.split())
    text = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", text)
    text = _ARTICLE_BEFORE_VOWEL.sub(r"\1n ", text)
    return text[:1].upper() + text[1:]


def realise(
    text: str,
    params: Mapping[str, str],
    values: Mapping[str, str | None],
    synonyms: Synonyms,
    rng: np.random.Generator,
    drop_other: bool = False,
) -> str:
    """Fill a template phrasing: each param once (one synonym for all its places), optionals kept at 1/2.

    An empty shape reads `thing` (so `<S>s` gives `things`), other empty values vanish.
    `drop_other` removes "other" / turns "another" into "a", for questions
    whose anchor cannot be among the things described.
    """
    for name, kind in params.items():
        value = values.get(name)
        word = value if value is not None else ("thing" if kind == "shape" else "")
        choices = synonyms.get(word) if word else None
        if choices:
            word = choices[int(rng.integers(len(choices)))]
        elif kind == "relation":
            word = RELATION_PHRASES.get(word, word)
        text = text.replace(name, word)
    text = _OPTIONAL.sub(lambda m: m.group(1) if rng.random() < 0.5 else "", text)
    if drop_other:
        text = f" {text} ".replace(" other ", " ").replace(" another ", " a ")
    return tidy(text)


OTHER_PARAMS = ("<Z>", "<C>", "<M>", "<S>", "<Z2>", "<C2>", "<M2>", "<S2>")
"""The params of the templates CLEVR's `other_heuristic` applies to, in (first, second) pairs by attribute."""


def clevr_drops_other(params: Mapping[str, str], values: Mapping[str, str | None]) -> bool:
    """CLEVR's `other_heuristic`: "other" goes when the two descriptions name different values of an attribute.

    It applies to templates whose params are exactly the two descriptions `<Z> <C> <M> <S>`
    and `<Z2> <C2> <M2> <S2>`; an empty shape reads `thing`, so `thing` against `cube` differs.
    Under Python 3, the interpreter of the released data, CLEVR's set comparison of the
    param names holds (under Python 2 it never would).
    """
    if set(params) != set(OTHER_PARAMS):
        return False
    words = {name: values.get(name) or ("thing" if params[name] == "shape" else "") for name in OTHER_PARAMS}
    return any(
        words[first] and words[second] and words[first] != words[second]
        for first, second in zip(OTHER_PARAMS[:4], OTHER_PARAMS[4:], strict=True)
    )
