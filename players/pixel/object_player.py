"""The `object-transformer` player: object slots detected in the image and the question's words,
one transformer, the answer read off directly (no program executor).

Loaded by name (`players.load("object-transformer")`) from the shipped file
`players/weights/object-transformer.pt`, or from any file written by
`clevr-game players train --player object-transformer` (`path=`). Each image of a
batch is perceived once, however many questions ask about it; the questions then
go through the transformer in groups of similar length, so short questions are
not padded to the longest one of the batch.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from clevr_game.errors import InputError
from players.pixel.object_transformer import ObjectTransformerNetwork
from players.pixel.player import PixelPlayer
from players.state.checkpoint import shipped_path

LENGTH_GROUP = 64
"""Questions per transformer call, sorted by length: less padding than one call for the whole batch."""

TRAIN_COMMAND = ("clevr-game players train --player object-transformer --data DIR --eval-data DIR "
                 "--out players/weights/object-transformer.pt")


class ObjectTransformerPlayer(PixelPlayer):
    """Detected object slots + question words -> transformer -> answer (shipped: `object-transformer`)."""

    kind = "object-transformer"
    shipped_file = "object-transformer.pt"
    default_name = "object-transformer"
    default_batch_size = 256

    def __init__(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        if path is None and not shipped_path(self.shipped_file).is_file():
            raise InputError(f"{shipped_path(self.shipped_file)}: no object-transformer weights are shipped yet; "
                             f"train them with `{TRAIN_COMMAND}` (players/weights/PIXEL_MODEL_CARD.md), "
                             "or pass path=FILE (--weights FILE)")
        super().__init__(path, **kwargs)

    @torch.inference_mode()
    def _answer_images(self, images: np.ndarray, image_of: np.ndarray, words: np.ndarray) -> list[str | list[str]]:
        assert isinstance(self.model, ObjectTransformerNetwork)
        detections = self.model.detect(torch.from_numpy(images).to(self.device))
        lengths = (words != 0).sum(axis=1)
        order = np.argsort(lengths, kind="stable")
        logits = np.empty((len(words), len(self.answers)), dtype=np.float32)
        for start in range(0, len(order), LENGTH_GROUP):
            rows = order[start : start + LENGTH_GROUP]
            longest = max(int(lengths[rows].max()), 1)
            group_words = torch.from_numpy(np.ascontiguousarray(words[rows, :longest])).to(self.device)
            group = detections.select(torch.from_numpy(image_of[rows]).to(self.device))
            logits[rows] = self.model.reason(group, group_words).float().cpu().numpy()
        return [[self.answers[i] for i in np.argsort(-scores)] for scores in logits]
