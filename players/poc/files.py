"""The CLEVR-POC player file: one torch dict of plain values and tensors, loadable with `weights_only=True`.

`{"format": "clevr-game-poc-player/1", "kind": NAME, "info": {...}, ...}` with
the parts of its kind: `parser` (both neuro-symbolic players), `perception`
and `image` (the pixel one), `neural` (the baseline). Written atomically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from clevr_game.errors import InputError
from players.state.checkpoint import read_torch, write_torch_atomic

FORMAT = "clevr-game-poc-player/1"
WEIGHTS_DIR = Path(__file__).resolve().parents[1] / "weights"
PARTS: dict[str, tuple[str, ...]] = {
    "poc-state-neuro-symbolic": ("parser",),
    "poc-neuro-symbolic": ("parser", "perception", "image"),
    "poc-neural": ("neural",),
}


def shipped_file(kind: str, variant: str = "") -> Path:
    return WEIGHTS_DIR / f"{kind}{'-' + variant if variant else ''}.pt"


def save_poc_player(path: str | os.PathLike[str], kind: str, parts: dict[str, Any], info: dict[str, Any]) -> None:
    missing = [p for p in PARTS[kind] if p not in parts]
    if missing:
        raise ValueError(f"a {kind} player file needs {', '.join(missing)}")
    write_torch_atomic(path, {"format": FORMAT, "kind": kind, "info": dict(info), **parts})


def load_poc_player(path: str | os.PathLike[str], kind: str, train_hint: str = "") -> dict[str, Any]:
    """The file's dict; InputError (one line naming the file) when missing, of another kind, or lacking a part."""
    path = Path(path)
    if not path.is_file():
        hint = f"; train one with: {train_hint}" if train_hint else ""
        raise InputError(f"{path}: no such {kind} player file{hint}")
    data = read_torch(path, f"{kind} player file")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{path}: not a CLEVR-POC player file (expected format {FORMAT!r})")
    if data.get("kind") != kind:
        raise InputError(f"{path}: a {data.get('kind')!r} player file, not {kind!r}")
    for part in PARTS[kind]:
        if not isinstance(data.get(part), dict):
            raise InputError(f"{path}: missing or malformed field {part!r}")
    return data
