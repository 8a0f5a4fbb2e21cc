"""Pixel-input Visual-QA players: read the rendered image (`Query.image_path`) and the question text.

- `PixelRelationNetworkPlayer` (`pixel-rn`) and `FiLMPlayer` (`film`): one
  network from (image, words) to answer logits; the answer is the best one
  allowed by the query's answer vocabulary.
- `NeuroSymbolicPlayer` (`neuro-symbolic`): perceives the objects, parses the
  question into a program and executes it on the perceived scene.

Each loads a pixel player file (by default the one shipped in
`players/weights/`), whose image spec (`image_spec`: preset and size) says how
the game must render the images it is shown; an image of another size is
resized. A missing or unreadable image gives an error answer for that query
only. Images are read and answered `batch_size` at a time.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np
import torch

from clevr_game.errors import InputError
from clevr_game.scene import Scene
from players.learned import LearnedPlayer
from players.pixel.checkpoint import PixelPlayerFile, load_player_file
from players.pixel.images import ImageSpec, load_image
from players.pixel.neuro_symbolic import NeuroSymbolicNetwork, answer_questions, perceive
from players.pixel.program_tokens import arities
from players.protocol import NEED_IMAGE, Answer, Query, checked_answer
from players.state.features import MAX_QUESTION_TOKENS


class PixelPlayer(LearnedPlayer):
    """A pixel-input player backed by one pixel player file."""

    needs = frozenset({NEED_IMAGE})
    default_name = "pixel-player"
    default_batch_size = 64
    file: PixelPlayerFile
    read_file = staticmethod(load_player_file)

    @property
    def image_spec(self) -> ImageSpec:
        return self.file.image

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers: list[Answer | None] = [None] * len(queries)
        for start in range(0, len(queries), self.batch_size):
            rows = range(start, min(start + self.batch_size, len(queries)))
            ready, images, image_of = [], [], []
            slot_of: dict[str, int] = {}  # several questions about one image read it once
            for row in rows:
                query = queries[row]
                where = f"{self.name}: query {query.item_id!r}"
                if query.image_path is None:
                    answers[row] = Answer.failed(query.item_id, f"{where}: no image given (a pixel player needs the image)")
                    continue
                path = str(query.image_path)
                if path not in slot_of:
                    try:
                        images.append(load_image(path, self.image_spec))
                    except InputError as exc:
                        answers[row] = Answer.failed(query.item_id, f"{where}: {exc}")
                        continue
                    slot_of[path] = len(images) - 1
                ready.append(row)
                image_of.append(slot_of[path])
            if ready:
                words = np.stack([self.vocabulary.encode(queries[r].question, MAX_QUESTION_TOKENS) for r in ready])
                raws = self._answer_images(np.stack(images), np.array(image_of), words)
                for row, raw in zip(ready, raws, strict=True):
                    answers[row] = self._checked(queries[row], raw)
        return [a for a in answers if a is not None]

    def _answer_images(self, images: np.ndarray, image_of: np.ndarray, words: np.ndarray) -> list[str | list[str]]:
        """Per question (asking about images[image_of[q]]): the answer text, or the answer classes best first."""
        raise NotImplementedError

    def _checked(self, query: Query, raw: str | list[str]) -> Answer:
        if isinstance(raw, str):
            return checked_answer(query, raw, self.name)
        allowed = set(query.answer_vocabulary().answer_values)
        best = next((answer for answer in raw if answer in allowed), None)
        if best is None:
            return Answer.failed(query.item_id, f"{self.name}: no answer of this vocabulary")
        return checked_answer(query, best, self.name)

    def _tensors(self, images: np.ndarray, words: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        longest = max(int((words != 0).sum(axis=1).max()), 1)
        return (torch.from_numpy(images).to(self.device),
                torch.from_numpy(np.ascontiguousarray(words[:, :longest])).to(self.device))


class _AnsweringPlayer(PixelPlayer):
    @torch.inference_mode()
    def _answer_images(self, images: np.ndarray, image_of: np.ndarray, words: np.ndarray) -> list[str | list[str]]:
        # Each image goes through the question-blind layers once, however many questions ask about it.
        image_tensor, word_tensor = self._tensors(images, words)
        logits = self.model(image_tensor, word_tensor, torch.from_numpy(image_of).to(self.device)).float().cpu().numpy()
        return [[self.answers[i] for i in np.argsort(-scores)] for scores in logits]


class PixelRelationNetworkPlayer(_AnsweringPlayer):
    """CNN cells as objects + question LSTM + relation network (shipped: `pixel-rn`)."""

    kind = "relation-network"
    shipped_file = "pixel-rn.pt"
    default_name = "pixel-rn"


class FiLMPlayer(_AnsweringPlayer):
    """CNN with question-conditioned FiLM layers (shipped: `film`)."""

    kind = "film"
    shipped_file = "film.pt"
    default_name = "film"


class NeuroSymbolicPlayer(PixelPlayer):
    """Perception + question parser + the game's program executor (shipped: `neuro-symbolic`)."""

    kind = "neuro-symbolic"
    shipped_file = "neuro-symbolic.pt"
    default_name = "neuro-symbolic"

    @functools.cached_property
    def arity(self) -> torch.Tensor:
        """Inputs of each program token, for the parser's constrained decoding."""
        return torch.from_numpy(arities(self.file.program_tokens)).to(self.device)

    @torch.inference_mode()
    def _answer_images(self, images: np.ndarray, image_of: np.ndarray, words: np.ndarray) -> list[str | list[str]]:
        assert isinstance(self.model, NeuroSymbolicNetwork)
        image_tensor, word_tensor = self._tensors(images, words)
        answered = answer_questions(
            self.model, image_tensor, word_tensor, image_of,
            arity=self.arity, tokens=self.file.program_tokens, fallback=self.file.fallback,
            width=self.image_spec.width, height=self.image_spec.height,
        )
        return list(answered.answers)

    @torch.inference_mode()
    def perceive(self, image_path: str | os.PathLike[str]) -> Scene:
        """The scene the player sees in an image: perceived objects with attributes and world coordinates."""
        assert isinstance(self.model, NeuroSymbolicNetwork)
        image = torch.from_numpy(load_image(image_path, self.image_spec)[None]).to(self.device)
        return perceive(self.model, image, self.image_spec.width, self.image_spec.height)[0].to_scene()
