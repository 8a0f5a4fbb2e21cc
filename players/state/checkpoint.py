"""The player file: everything a state player needs to answer, loadable with `weights_only=True`.

A player file is a dict of plain values and tensors: format tag, model kind and
config, the state dict, the word list (ids are positions) and the answer list,
and `info` (data, command, steps, measured accuracy). Written atomically.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.scene import new_file_mode
from clevr_game.text import PAD, UNKNOWN, WordVocabulary
from players.state.models import build_model, config_dict

FORMAT = "clevr-game-state-player/1"
WEIGHTS_DIR = Path(__file__).resolve().parents[1] / "weights"
"""Where the shipped player files live (package data)."""


@dataclass
class PlayerFile:
    kind: str
    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    words: list[str]
    answers: list[str]
    info: dict[str, Any]

    def vocabulary(self) -> WordVocabulary:
        return WordVocabulary(self.words[2:])

    def build(self, device: torch.device | str = "cpu") -> nn.Module:
        """The network with these weights, in eval mode on `device`."""
        model = build_model(self.kind, self.config, len(self.words), len(self.answers))
        model.load_state_dict(self.state_dict)
        return model.to(device).eval()


def player_file_from(model: nn.Module, kind: str, vocabulary: WordVocabulary, answers: list[str],
                     info: dict[str, Any]) -> PlayerFile:
    state = {name: tensor.detach().to("cpu").clone() for name, tensor in model.state_dict().items()}
    return PlayerFile(kind, config_dict(model), state, list(vocabulary.words), list(answers), dict(info))


def to_dict(player_file: PlayerFile) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "kind": player_file.kind,
        "config": player_file.config,
        "state_dict": player_file.state_dict,
        "words": player_file.words,
        "answers": player_file.answers,
        "info": player_file.info,
    }


COMMON_FIELDS: tuple[tuple[str, type], ...] = (
    ("kind", str), ("config", dict), ("state_dict", dict), ("words", list), ("answers", list), ("info", dict),
)
"""Fields every player file has, state or pixel, with their types."""


def check_player_dict(data: Any, source: str, file_format: str, what: str,
                      fields: tuple[tuple[str, type], ...] = COMMON_FIELDS) -> dict[str, Any]:
    """`data` as a player file dict of `file_format`; InputError naming the file and the field that is wrong."""
    if not isinstance(data, dict) or data.get("format") != file_format:
        raise InputError(f"{source}: not a {what} file (expected format {file_format!r})")
    for key, kind in fields:
        if not isinstance(data.get(key), kind):
            raise InputError(f"{source}: field {key!r} missing or not a {kind.__name__}")
    if data["words"][:2] != [PAD, UNKNOWN]:
        raise InputError(f"{source}: field 'words' must start with {PAD!r}, {UNKNOWN!r}")
    return data


def from_dict(data: Any, source: str) -> PlayerFile:
    """Check a loaded dict; InputError naming the file and the field that is wrong."""
    data = check_player_dict(data, source, FORMAT, "state player")
    return PlayerFile(data["kind"], data["config"], data["state_dict"], data["words"], data["answers"], data["info"])


def write_torch_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """torch.save to a temporary file in the same folder, then os.replace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            torch.save(data, stream)
        os.chmod(temporary, new_file_mode())  # mkstemp makes it owner-only; the user's umask decides
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def save_player_file(path: str | os.PathLike[str], player_file: PlayerFile) -> None:
    write_torch_atomic(path, to_dict(player_file))


def read_torch(path: str | os.PathLike[str], what: str) -> Any:
    """torch.load(weights_only=True) with a one-line InputError for a missing or unreadable file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such {what}")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty {what} (0 bytes)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a corrupt or foreign file
        lines = str(exc).strip().splitlines()  # some (EOFError of a truncated file) say nothing
        reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
        raise InputError(f"{path}: cannot read {what}: {reason}") from None


def load_player_file(path: str | os.PathLike[str]) -> PlayerFile:
    return from_dict(read_torch(path, "player file"), str(path))


def shipped_path(file_name: str) -> Path:
    return WEIGHTS_DIR / file_name
