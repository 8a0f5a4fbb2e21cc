"""Ship a trained player file: measure it on the two held-out sets and record them in its `info`.

A shipped file carries the figures its card quotes, so a test can hold the file to them:
`heldout` (the project's own templates on generated scenes) and `clevr_heldout` (CLEVR's
templates, CLEVR's question distribution, on the 500 real val scenes). It also records the
file it was trained from (`init_file`: path, sha256) and any `--note KEY=VALUE`.

    python -m experiments.finalize_player --file runs/st65/state-transformer.pt \
        --heldout runs/state/heldout --clevr-heldout runs/rv-state --out players/weights/state-transformer.pt
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any


def _checkpoint_module(path: str) -> Any:
    """The checkpoint module that reads and writes the player file at `path` (pixel or state)."""
    from players.registry import pixel_file_kind

    if pixel_file_kind(path) is not None:
        from players.pixel import checkpoint
    else:
        from players.state import checkpoint
    return checkpoint


def measure(path: str, folder: str) -> dict[str, Any]:
    """Accuracy and per-family accuracy of the player file at `path` on the dataset in `folder`."""
    from players.pixel.evaluation import evaluate_on_dataset
    from players.registry import load

    with load(f"file:{path}") as player:
        result = evaluate_on_dataset(player, folder)
    return {"data": folder, "questions": sum(result.total.values()), "accuracy": round(result.accuracy, 4),
            "families": {family: round(value, 4) for family, value in result.family_accuracy().items()}}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.card.make_protocol import sha256_of

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", required=True, help="the trained player file")
    parser.add_argument("--heldout", required=True, help="own-template held-out dataset folder")
    parser.add_argument("--clevr-heldout", required=True, help="CLEVR-template dataset on the real val scenes")
    parser.add_argument("--out", required=True, help="where to write the shipped file")
    parser.add_argument("--note", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    checkpoint = _checkpoint_module(args.file)
    player_file = checkpoint.load_player_file(args.file)
    info = dict(player_file.info)
    if info.get("init"):
        info["init_file"] = {"path": info["init"], "sha256": sha256_of(Path(info["init"]))}
    info["heldout"] = measure(args.file, args.heldout)
    info["clevr_heldout"] = measure(args.file, args.clevr_heldout)
    for note in args.note:
        key, _, value = note.partition("=")
        info[key] = value
    checkpoint.save_player_file(args.out, dataclasses.replace(player_file, info=info))
    print(f"wrote {args.out}: heldout {info['heldout']['accuracy']:.4f}, "
          f"clevr_heldout {info['clevr_heldout']['accuracy']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
