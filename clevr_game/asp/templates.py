"""The eleven constraint templates: ASP form, English sentence, and a parser back from ASP.

An instance is a `ConstraintSpec(template, params)`; params use the keys
region, region2, attribute, value, value2, attribute2, n. `spec.asp()` renders
the canonical ASP text, `spec.sentence()` the English one, and
`match_constraint(asp)` recognises canonical text again (the compiled checker
uses that; anything else is checked by clingo).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from clevr_game.vocab import ATTRIBUTES, CLEVR_POC, Vocabulary

_UNARY_BODY = "object(X), at(X, {region})"
_COUNT = ":- #count {{ X : object(X), at(X, {region}), hasProperty(X, {attribute}, {value}) }} "
_PAIR_HEAD = ":- #count {{ X, Y : object(X), object(Y), "
_PAIR_FILTER = "hasProperty(X, {attribute2}, {value2}), hasProperty(Y, {attribute2}, {value2}), "


def _pair_formats(comparison: str) -> tuple[str, ...]:
    # Same region: unordered pairs (X < Y); two regions: X in the first, Y in the second.
    tail = "sameProperty(X, Y, {attribute}) }} " + comparison + " {n}."
    same = _PAIR_HEAD + "X < Y, at(X, {region}), at(Y, {region}), "
    two = _PAIR_HEAD + "at(X, {region}), at(Y, {region2}), "
    return (same + tail, same + _PAIR_FILTER + tail, two + tail, two + _PAIR_FILTER + tail)


def _is(attribute: str, value: str) -> str:
    """Predicate phrase after "is": `red`, `large`, `made of metal`, `a cube`."""
    if attribute == "material":
        return f"made of {value}"
    if attribute == "shape":
        return f"a {value}"
    return value


def _are(attribute: str, value: str) -> str:
    if attribute == "shape":
        return f"{value}s"
    return _is(attribute, value)


def things(attribute: str | None, value: str | None, count: int = 2) -> str:
    """Noun phrase: `cubes`, `red objects`, `metal object`, `objects`."""
    plural = count != 1
    if attribute is None:
        return "objects" if plural else "object"
    if attribute == "shape":
        return f"{value}s" if plural else str(value)
    return f"{value} objects" if plural else f"{value} object"


def _where(p: dict) -> str:
    if p.get("region2", p["region"]) == p["region"]:
        return f"in region {p['region']}"
    return f"in regions {p['region']} and {p['region2']}"


def _pairs(p: dict, bound: str) -> str:
    n = p["n"]
    kind = things(p.get("attribute2"), p.get("value2"))
    if n == 0 and bound == "At most":
        return f"No pair of {kind} {_where(p)} has the same {p['attribute']}."
    noun = "pair" if n == 1 else "pairs"
    verb = "has" if n == 1 else "have"
    return f"{bound} {n} {noun} of {kind} {_where(p)} {verb} the same {p['attribute']}."


@dataclass(frozen=True)
class Template:
    name: str
    formats: tuple[str, ...]
    sentence: Callable[[dict], str]
    description: str


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(
            "all_in_region",
            (":- " + _UNARY_BODY + ", not hasProperty(X, {attribute}, {value}).",),
            lambda p: f"All objects in region {p['region']} are {_are(p['attribute'], p['value'])}.",
            "value restriction: every object in region R has P = V",
        ),
        Template(
            "none_in_region",
            (":- " + _UNARY_BODY + ", hasProperty(X, {attribute}, {value}).",),
            lambda p: f"No object in region {p['region']} is {_is(p['attribute'], p['value'])}.",
            "negation: no object in region R has P = V",
        ),
        Template(
            "either_or",
            (":- " + _UNARY_BODY + ", not hasProperty(X, {attribute}, {value}), not hasProperty(X, {attribute}, {value2}).",),
            lambda p: (
                f"Every object in region {p['region']} is "
                f"{_is(p['attribute'], p['value'])} or {_is(p['attribute'], p['value2'])}."
            ),
            "either-or: objects in region R have P = V1 or P = V2",
        ),
        Template(
            "exactly_n",
            (_COUNT + "!= {n}.",),
            lambda p: f"Region {p['region']} holds exactly {p['n']} {things(p['attribute'], p['value'], p['n'])}.",
            "exactly N objects in region R have P = V",
        ),
        Template(
            "at_least_n",
            (_COUNT + "< {n}.",),
            lambda p: f"Region {p['region']} holds at least {p['n']} {things(p['attribute'], p['value'], p['n'])}.",
            "at least N objects in region R have P = V",
        ),
        Template(
            "at_most_n",
            (_COUNT + "> {n}.",),
            lambda p: f"Region {p['region']} holds at most {p['n']} {things(p['attribute'], p['value'], p['n'])}.",
            "at most N objects in region R have P = V",
        ),
        Template(
            "at_least_pairs",
            _pair_formats("<"),
            lambda p: _pairs(p, "At least"),
            "at least N pairs of objects in regions R1, R2 (optionally with P2 = V2) share P",
        ),
        Template(
            "at_most_pairs",
            _pair_formats(">"),
            lambda p: _pairs(p, "At most"),
            "at most N pairs of objects in regions R1, R2 (optionally with P2 = V2) share P",
        ),
        Template(
            "global_ban",
            (":- object(X), hasProperty(X, {attribute}, {value}).",),
            lambda p: f"No object in the scene is {_is(p['attribute'], p['value'])}.",
            "global ban: no object anywhere has P = V",
        ),
        Template(
            "implication",
            (":- " + _UNARY_BODY + ", hasProperty(X, {attribute2}, {value2}), not hasProperty(X, {attribute}, {value}).",),
            lambda p: (
                f"Every {things(p['attribute2'], p['value2'], 1)} in region {p['region']} "
                f"is {_is(p['attribute'], p['value'])}."
            ),
            "implication: every object in region R with P2 = V2 has P = V",
        ),
        Template(
            "same_in_region",
            (":- object(X), object(Y), X < Y, at(X, {region}), at(Y, {region}), not sameProperty(X, Y, {attribute}).",),
            lambda p: f"All objects in region {p['region']} have the same {p['attribute']}.",
            "uniformity: all objects in region R share the same P",
        ),
    )
}


PAIR_TEMPLATES = frozenset({"at_least_pairs", "at_most_pairs"})


@dataclass(frozen=True)
class ConstraintSpec:
    """One instantiated template."""

    template: str
    params: dict = field(hash=False)

    def _format(self) -> str:
        formats = TEMPLATES[self.template].formats
        if len(formats) == 1:
            return formats[0]
        same_region = self.params.get("region2", self.params["region"]) == self.params["region"]
        filtered = self.params.get("attribute2") is not None
        return formats[(0 if same_region else 2) + (1 if filtered else 0)]

    def asp(self) -> str:
        return self._format().format(**self.params)

    def sentence(self) -> str:
        return TEMPLATES[self.template].sentence(self.params)

    def regions(self) -> frozenset[int]:
        """The regions the constraint talks about (empty for a global ban)."""
        return frozenset(self.params[k] for k in ("region", "region2") if k in self.params)


# ------------------------------------------------------------------ recognising canonical ASP

def normalise_asp(text: str) -> str:
    """Whitespace-insensitive form: single spaces, none inside argument lists' edges."""
    text = " ".join(text.split())
    return re.sub(r"\s*([(),])\s*", lambda m: m.group(1) + (" " if m.group(1) == "," else ""), text)


_TOKEN = re.compile(r"\{\{|\}\}|\{(\w+)\}")
_FIELD_PATTERNS = {"region": r"\d+", "region2": r"\d+", "n": r"\d+"}
_INT_FIELDS = ("region", "region2", "n")


def _regex(fmt: str) -> re.Pattern[str]:
    """Format string -> regex over normalised ASP: a field's first use is a named group, later uses backreferences."""
    text = normalise_asp(fmt)
    out, seen, position = [], set(), 0
    for match in _TOKEN.finditer(text):
        out.append(re.escape(text[position : match.start()]))
        name = match.group(1)
        if name is None:
            out.append(re.escape(match.group(0)[0]))
        elif name in seen:
            out.append(f"(?P={name})")
        else:
            seen.add(name)
            out.append(f"(?P<{name}>{_FIELD_PATTERNS.get(name, r'[a-z][A-Za-z0-9_]*')})")
        position = match.end()
    out.append(re.escape(text[position:]))
    return re.compile("".join(out))


_MATCHERS: list[tuple[str, re.Pattern[str]]] = [
    (name, _regex(fmt)) for name, template in TEMPLATES.items() for fmt in template.formats
]


def _valid(params: dict, vocabulary: Vocabulary) -> bool:
    for key in ("attribute", "attribute2"):
        if key in params and params[key] not in ATTRIBUTES:
            return False
    pairs = (("value", "attribute"), ("value2", "attribute2" if "attribute2" in params else "attribute"))
    for value_key, attribute_key in pairs:
        if value_key in params and params[value_key] not in vocabulary.values(params[attribute_key]):
            return False
    return True


def match_constraint(asp: str, vocabulary: Vocabulary = CLEVR_POC) -> ConstraintSpec | None:
    """The template instance whose canonical ASP is `asp` (up to whitespace), or None."""
    text = normalise_asp(asp)
    for name, regex in _MATCHERS:
        match = regex.fullmatch(text)
        if not match:
            continue
        params: dict = dict(match.groupdict())
        for key in _INT_FIELDS:
            if key in params:
                params[key] = int(params[key])
        if name in PAIR_TEMPLATES:
            params.setdefault("region2", params["region"])
        if not _valid(params, vocabulary):
            continue
        spec = ConstraintSpec(name, params)
        if normalise_asp(spec.asp()) == text:
            return spec
    return None
