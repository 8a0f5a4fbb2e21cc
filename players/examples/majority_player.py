"""A trivial state-input player over JSON lines: the reference for writing your own.

It reads one query per stdin line and writes one answer per stdout line (schema in
docs/players.md). The rule is deliberately dumb, a baseline that ignores most of the
question:
- "how many ..." / "number of ..."  -> the number of objects of the most common shape;
- a question about colour, shape, material or size -> the most common value of that
  attribute in the scene (ties broken alphabetically);
- anything else -> "yes".

Run it by hand:  python -m players.examples.majority_player < queries.jsonl
Use it in a game: players.registry.load("subprocess:python -m players.examples.majority_player")
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any, TextIO

# The words that name an attribute in CLEVR's question templates.
ATTRIBUTE_WORDS: dict[str, tuple[str, ...]] = {
    "color": ("color", "colour"),
    "shape": ("shape",),
    "material": ("material", "made of"),
    "size": ("size", "how big"),
}


def most_common(values: list[str]) -> str | None:
    if not values:
        return None
    counts = Counter(values)
    return min(counts, key=lambda value: (-counts[value], value))


def answer_question(question: str, scene: dict[str, Any] | None) -> str:
    """The majority rule on one question; `scene` is CLEVR scene JSON (or None)."""
    objects = (scene or {}).get("objects", [])
    text = question.lower()
    if "how many" in text or "number of" in text:
        shape = most_common([o["shape"] for o in objects])
        return str(sum(o["shape"] == shape for o in objects)) if shape else "0"
    for attribute, words in ATTRIBUTE_WORDS.items():
        if any(word in text for word in words):
            value = most_common([o[attribute] for o in objects])
            if value is not None:
                return value
    return "yes"


def serve(lines: TextIO, out: TextIO) -> None:
    """Answer every query line of `lines` on `out`, one line each, flushed at once."""
    for line in lines:
        if not line.strip():
            continue
        query = json.loads(line)
        try:
            reply = {"id": query["id"], "answer": answer_question(query["question"], query.get("scene"))}
        except (KeyError, TypeError) as exc:
            # Report instead of dying: the game records it as this query's error.
            reply = {"id": query.get("id"), "error": f"malformed query: missing {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()  # the game waits for each line; a buffered answer looks like a hang


def main() -> None:
    serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
