"""What every learned player shares: one player file, its network on a device, answered in batches.

A subclass names its file reader, model kind and shipped file; the path defaults
to that shipped file in `players/weights/`, and a file holding another kind of
model is a one-line InputError.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from clevr_game.errors import InputError
from players.protocol import Player
from players.state.checkpoint import shipped_path


class LearnedPlayer(Player):
    kind = ""
    shipped_file = ""
    default_name = "learned-player"
    default_batch_size = 64

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        device: str | torch.device = "cpu",
        batch_size: int | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else shipped_path(self.shipped_file)
        self.file = self.read_file(self.path)
        if self.kind and self.file.kind != self.kind:
            raise InputError(f"{self.path}: holds a {self.file.kind!r} model, not a {self.kind!r} one")
        self.batch_size = self.default_batch_size if batch_size is None else batch_size
        if self.batch_size < 1:
            raise InputError(f"batch_size must be at least 1, got {self.batch_size}")
        self.name = name or type(self).default_name
        self.device = torch.device(device)
        self.model = self.file.build(self.device)
        self.vocabulary = self.file.vocabulary()
        self.answers = list(self.file.answers)

    @staticmethod
    def read_file(path: Path) -> Any:
        """The checked player file at `path`."""
        raise NotImplementedError
