"""Atomic writes: the whole new file or the old one, never half of one, and no temporary left behind."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from clevr_game.atomic import (
    atomic_path,
    new_file_mode,
    open_atomic,
    write_json_atomic,
    write_text_atomic,
)


def test_json_is_written_with_the_options_given_and_the_usual_mode(tmp_path: Path) -> None:
    path = tmp_path / "deeper" / "result.json"
    write_json_atomic(path, {"b": 1, "a": [2]}, indent=1, sort_keys=True)
    assert path.read_text(encoding="utf-8") == json.dumps({"a": [2], "b": 1}, indent=1)
    assert stat.S_IMODE(path.stat().st_mode) == new_file_mode()
    assert os.listdir(path.parent) == ["result.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    write_text_atomic(path, "old\n")
    with pytest.raises(RuntimeError), open_atomic(path, durable=True) as handle:
        handle.write("half a")
        raise RuntimeError("stopped while writing")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert os.listdir(tmp_path) == ["trials.jsonl"]


def test_the_temporary_path_keeps_the_suffix_for_writers_that_choose_a_format_by_it(tmp_path: Path) -> None:
    path = tmp_path / "figure.png"
    with atomic_path(path) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".png" and tmp.name.startswith(".figure.")
        assert not path.exists()
        tmp.write_bytes(b"\x89PNG")
    assert path.read_bytes() == b"\x89PNG"
    assert os.listdir(tmp_path) == ["figure.png"]
