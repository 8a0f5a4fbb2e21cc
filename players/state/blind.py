"""`blind`: a player that answers from the question text alone, the floor of every accuracy table.

It declares no needs, so the game sends it neither scene nor image nor program
(`Query.restricted_to`); only the question and the answer vocabulary arrive. A
robustness figure is worth comparing only above what the wording and the answer
priors give without looking, and this player measures exactly that. Trained with
`clevr-game players train --player blind` (model kind `question-only`,
players/weights/MODEL_CARD.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from players.protocol import Answer, Query, checked_answer
from players.state.features import MAX_OBJECTS, MAX_QUESTION_TOKENS
from players.state.player import StatePlayer


class BlindPlayer(StatePlayer):
    """LSTM over the question words, no scene (shipped: `blind`)."""

    needs: frozenset[str] = frozenset()
    kind = "question-only"
    shipped_file = "blind.pt"
    default_name = "blind"

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        count = len(queries)
        words = np.zeros((count, MAX_QUESTION_TOKENS), dtype=np.int64)
        for row, query in enumerate(queries):
            words[row] = self.vocabulary.encode(query.question, MAX_QUESTION_TOKENS)
        # The network never reads the object fields; empty ones keep the shared batch shape.
        positions = np.zeros((count, MAX_OBJECTS, 2), dtype=np.float32)
        attributes = np.zeros((count, MAX_OBJECTS, 4), dtype=np.int64)
        present = np.zeros((count, MAX_OBJECTS), dtype=bool)
        answers: list[Answer] = []
        for start in range(0, count, self.batch_size):
            rows = slice(start, start + self.batch_size)
            logits = self._logits(positions[rows], attributes[rows], present[rows], words[rows])
            for query, scores in zip(queries[rows], logits, strict=True):
                allowed = set(query.answer_vocabulary().answer_values)
                best = next((self.answers[i] for i in np.argsort(-scores) if self.answers[i] in allowed), None)
                if best is None:
                    answers.append(Answer.failed(query.item_id, f"{self.name}: no answer of this vocabulary"))
                else:
                    answers.append(checked_answer(query, best, self.name))
        return answers
