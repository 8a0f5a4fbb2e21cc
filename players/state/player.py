"""State-input Visual-QA players: read the scene graph and the question text, answer in batches.

`StateTransformerPlayer` and `StateRelationNetworkPlayer` load a player file
(by default the one shipped in `players/weights/`) on CPU or any torch device.
Words the file's vocabulary does not know become its UNKNOWN token; a scene the
features cannot encode (more than 10 objects, an unknown attribute value) gives
an error answer for that query only. Answers are restricted to the query's
answer vocabulary (a CLEVR scene is never answered `cone`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from clevr_game.errors import InputError
from players.learned import LearnedPlayer
from players.protocol import NEED_SCENE, Answer, Query, checked_answer
from players.state.checkpoint import PlayerFile, load_player_file
from players.state.features import MAX_OBJECTS, MAX_QUESTION_TOKENS, scene_features
from players.state.models import StateBatch

LENGTH_GROUP = 64
"""Questions per network call, sorted by length, so short questions are not padded to the batch's longest."""


class StatePlayer(LearnedPlayer):
    """A state-input player backed by one player file."""

    needs = frozenset({NEED_SCENE})
    default_name = "state-player"
    default_batch_size = 512
    file: PlayerFile
    read_file = staticmethod(load_player_file)

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers: list[Answer | None] = [None] * len(queries)
        ready: list[int] = []
        positions = np.zeros((len(queries), MAX_OBJECTS, 2), dtype=np.float32)
        attributes = np.zeros((len(queries), MAX_OBJECTS, 4), dtype=np.int64)
        present = np.zeros((len(queries), MAX_OBJECTS), dtype=bool)
        words = np.zeros((len(queries), MAX_QUESTION_TOKENS), dtype=np.int64)
        for row, query in enumerate(queries):
            where = f"{self.name}: query {query.item_id!r}"
            if query.scene is None:
                answers[row] = Answer.failed(query.item_id, f"{where}: no scene given (a state player needs the scene)")
                continue
            try:
                pos, attr = scene_features(query.scene, f"{where}: scene")
            except InputError as exc:
                answers[row] = Answer.failed(query.item_id, str(exc))
                continue
            positions[row, : len(pos)] = pos
            attributes[row, : len(attr)] = attr
            present[row, : len(pos)] = True
            words[row] = self.vocabulary.encode(query.question, MAX_QUESTION_TOKENS)
            ready.append(row)
        for start in range(0, len(ready), self.batch_size):
            rows = ready[start : start + self.batch_size]
            logits = self._logits(positions[rows], attributes[rows], present[rows], words[rows])
            for row, scores in zip(rows, logits, strict=True):
                query = queries[row]
                allowed = set(query.answer_vocabulary().answer_values)
                order = np.argsort(-scores)
                best = next((self.answers[i] for i in order if self.answers[i] in allowed), None)
                if best is None:
                    answers[row] = Answer.failed(query.item_id, f"{self.name}: no answer of this vocabulary")
                else:
                    answers[row] = checked_answer(query, best, self.name)
        return [a for a in answers if a is not None]

    @torch.inference_mode()
    def _logits(self, positions: np.ndarray, attributes: np.ndarray, present: np.ndarray,
                words: np.ndarray) -> np.ndarray:
        # Questions sorted by length and run LENGTH_GROUP at a time, each group padded only to its own
        # longest question: the words are most of the tokens, so this is about 1.5x faster than one call.
        lengths = (words != 0).sum(axis=1)
        order = np.argsort(lengths, kind="stable")
        logits = np.empty((len(words), len(self.answers)), dtype=np.float32)
        for start in range(0, len(order), LENGTH_GROUP):
            rows = order[start : start + LENGTH_GROUP]
            longest = max(int(lengths[rows].max()), 1)
            batch = StateBatch(
                torch.from_numpy(positions[rows]), torch.from_numpy(attributes[rows]),
                torch.from_numpy(present[rows]), torch.from_numpy(np.ascontiguousarray(words[rows, :longest])),
            ).to(self.device)
            logits[rows] = self.model(batch).float().cpu().numpy()
        return logits


class StateTransformerPlayer(StatePlayer):
    """Transformer over object tokens and question words (shipped: `state-transformer`)."""

    kind = "transformer"
    shipped_file = "state-transformer.pt"
    default_name = "state-transformer"


class StateRelationNetworkPlayer(StatePlayer):
    """Relation network of Santoro et al. 2017 on object states (shipped: `state-rn`)."""

    kind = "relation-network"
    shipped_file = "state-rn.pt"
    default_name = "state-rn"
