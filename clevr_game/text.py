"""Question text as tokens: one tokenizer and word vocabulary shared by players and the adversary.

Id 0 pads, id 1 stands for any word the vocabulary does not know (documented
unknown token: a question with new words still encodes, never crashes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

PAD = "<pad>"
UNKNOWN = "<unk>"
MAX_QUESTION_TOKENS = 48
"""Question tokens kept by the players and the adversary; CLEVR's longest template questions have about 45."""
_TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


def tokenize(text: str) -> list[str]:
    """Lower-case words and single punctuation marks: `Is it red?` -> [is, it, red, ?]."""
    return _TOKEN.findall(text.lower())


class WordVocabulary:
    """Words <-> ids; ids 0 and 1 are PAD and UNKNOWN."""

    def __init__(self, words: Iterable[str]):
        self.words: list[str] = [PAD, UNKNOWN]
        seen = set(self.words)
        for word in words:
            if word not in seen:
                seen.add(word)
                self.words.append(word)
        self.ids = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str, length: int) -> np.ndarray:
        """(length,) int64 ids, truncated or padded with 0."""
        ids = [self.ids.get(w, 1) for w in tokenize(text)][:length]
        out = np.zeros(length, dtype=np.int64)
        out[: len(ids)] = ids
        return out

    def unknown_words(self, text: str) -> list[str]:
        return [w for w in tokenize(text) if w not in self.ids]

    @classmethod
    def from_texts(cls, texts: Iterable[str], extra_words: Iterable[str] = ()) -> WordVocabulary:
        words = set(extra_words)
        for text in texts:
            words.update(tokenize(text))
        return cls(sorted(words))


_PLACEHOLDER = re.compile(r"<[A-Z]+\d*>")


@lru_cache(maxsize=1)
def default_word_vocabulary() -> WordVocabulary:
    """Every word the project's templates, synonyms and vocabularies can produce, sorted.

    Read from the template and synonym files shipped in the package, so it is the
    same on every machine and does not change when a dataset does.
    """
    import json
    from pathlib import Path

    from clevr_game.vocab import CLEVR_POC, RELATIONS

    data = Path(__file__).parent / "data"
    texts: list[str] = []
    for path in sorted((data / "templates").glob("*.json")):
        for template in json.loads(path.read_text(encoding="utf-8")):
            texts.extend(_PLACEHOLDER.sub(" ", t) for t in template.get("text", []))
    synonyms = data / "synonyms.json"
    if synonyms.is_file():
        for words in json.loads(synonyms.read_text(encoding="utf-8")).values():
            texts.extend(words)
    plurals = [f"{v}s" for v in CLEVR_POC.shapes] + ["things", "objects", "balls", "blocks"]
    extra = set(CLEVR_POC.answer_values) | set(RELATIONS) | {"thing", "object", "cubes", "spheres"} | set(plurals)
    return WordVocabulary.from_texts(texts, extra)
