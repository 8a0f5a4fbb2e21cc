"""The fixed vocabularies of the CLEVR-POC players: question words, program tokens, constraint tokens.

Hidden-object questions come from a small grammar (`clevr_game.asp.questions`):
"What A is the missing [V] {object|shape} that C [and C]?", each clause C
"is {left of|right of|in front of|behind} the NP" or "has the same A as the NP",
NP a description by values. Their programs use a handful of functions, so the
parser's output vocabulary is closed: every `filter_A[v]` of the CLEVR-POC
values, `relate[r]`, `same_A`, `intersect`, `unique`, `scene` and `query_A`.
Fixing the lists here (not reading them from a training set) gives one token
id per meaning in every player file, and a word the grammar never uses is the
UNKNOWN id, never an error.
"""

from __future__ import annotations

import re

from clevr_game.text import WordVocabulary, tokenize
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC, RELATIONS
from players.pixel.program_tokens import RESERVED

GRAMMAR_WORDS = (
    "what", "is", "the", "missing", "object", "that", "has", "same", "as", "and",
    "left", "right", "of", "in", "front", "behind", "?",
)
SENTENCE_WORDS = (
    "every", "all", "no", "objects", "object", "in", "region", "regions", "are", "is", "or", "a", "an",
    "made", "of", "holds", "exactly", "at", "least", "most", "pair", "pairs", "has", "have", "the", "same",
    "scene", "and", "0", "1", "2", "3", ".", "cubes", "spheres", "cylinders", "cones",
)
"""Words of the constraint templates' English sentences (clevr_game.asp.templates), for the NL baseline."""


def attribute_values() -> list[tuple[str, str]]:
    """(attribute, value) for every CLEVR-POC value, in ATTRIBUTES order: the neural baseline's outputs."""
    return [(a, v) for a in ATTRIBUTES for v in CLEVR_POC.values(a)]


def question_words() -> WordVocabulary:
    values = [v for a in ATTRIBUTES for v in CLEVR_POC.values(a)]
    return WordVocabulary(sorted({*GRAMMAR_WORDS, *ATTRIBUTES, *values}))


def sentence_words() -> WordVocabulary:
    values = [v for a in ATTRIBUTES for v in CLEVR_POC.values(a)]
    return WordVocabulary(sorted({*GRAMMAR_WORDS, *SENTENCE_WORDS, *ATTRIBUTES, *values}))


def program_tokens() -> list[str]:
    """RESERVED, then every token a hidden-object program can hold, sorted."""
    tokens = {"scene", "unique", "intersect", *(f"relate[{r}]" for r in RELATIONS)}
    for attribute in ATTRIBUTES:
        tokens.add(f"same_{attribute}")
        tokens.add(f"query_{attribute}")
        tokens.update(f"filter_{attribute}[{v}]" for v in CLEVR_POC.values(attribute))
    return list(RESERVED) + sorted(tokens)


_ASP_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|:-|!=|<=|>=|[^\sA-Za-z0-9_]")


def asp_tokens(text: str) -> list[str]:
    """Identifiers, numbers and symbols of the environment's constraints (`:-` lines, comments dropped)."""
    lines = [line.split("%", 1)[0] for line in text.splitlines()]
    return _ASP_TOKEN.findall(" ".join(line for line in lines if ":-" in line))


def asp_words() -> WordVocabulary:
    """Every token the constraint templates write in ASP, plus values and attributes."""
    import numpy as np

    from clevr_game.asp.envgen import random_spec
    from clevr_game.asp.templates import TEMPLATES

    rng = np.random.default_rng(0)
    seen = {"object", "(", ")", ".", ":-", "X", "Y", *(str(n) for n in range(10))}
    for name in TEMPLATES:
        for region in range(4):
            for _ in range(30):
                seen.update(asp_tokens(random_spec(rng, region, template=name).asp()))
    seen.update(v for a in ATTRIBUTES for v in CLEVR_POC.values(a))
    seen.update(ATTRIBUTES)
    return WordVocabulary(sorted(seen))


def sentences_of(environment_text: str) -> str:
    """The environment's English sentences (its `%` comment lines but the title), joined into one text."""
    lines = [line.strip()[1:].strip() for line in environment_text.splitlines() if line.strip().startswith("%")]
    return " ".join(lines[1:]) if lines and lines[0].lower().startswith("clevr-poc environment") else " ".join(lines)


def asked_attribute(question: str) -> str | None:
    """The attribute a hidden-object question asks ("What color is ..." -> color), or None."""
    words = tokenize(question)
    return words[1] if len(words) > 1 and words[0] == "what" and words[1] in ATTRIBUTES else None
