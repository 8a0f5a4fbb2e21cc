"""Which player weights a committed results folder was made with: `WEIGHTS.md` from its trial records.

Every trial records the digest of the player file it ran against (`player_weights`: the first
16 hex digits of its sha256, `players.registry.weights_digest`). A player retrained later gets
a new digest, so its trials rerun when the benchmark runs again; until then the folder's
figures describe the older file. This writes that list beside the records, and `--check`
prints which of them the shipped files still match.

    python -m benchmarks.weights_note results/quick results/table2
    python -m benchmarks.weights_note --check results/quick
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from clevr_game.atomic import write_text_atomic
from clevr_game.errors import InputError


def made_with(folder: Path) -> Counter[tuple[str, str]]:
    """(player, weights digest) -> trial count, over the folder's trial records."""
    counts: Counter[tuple[str, str]] = Counter()
    path = folder / "trials.jsonl"
    if not path.is_file():
        raise InputError(f"{folder}: no trials.jsonl (a folder written by `clevr-game benchmark`)")
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {number}: not JSON ({exc.msg})") from None
        counts[(str(record.get("player")), str(record.get("player_weights") or "none"))] += 1
    return counts


def note(folder: Path, counts: Counter[tuple[str, str]]) -> str:
    rows = "\n".join(f"| `{player}` | `{digest}` | {n} |" for (player, digest), n in sorted(counts.items()))
    return (f"# Weights behind `{folder.name}`\n\n"
            "The player files this folder's trials ran against, by weights digest (the first 16 hex digits\n"
            "of the file's sha256; `none` for a player without a weights file, such as the oracle or an\n"
            "external model). A player retrained since has another digest, and its trials rerun when the\n"
            "same command runs again. `python -m benchmarks.weights_note --check DIR` says which of these the\n"
            "shipped files still match.\n\n"
            "| player | weights | trials |\n|---|---|---|\n" + rows + "\n")


def check(counts: Counter[tuple[str, str]]) -> list[str]:
    """One line per (player, digest): whether today's file for that player has that digest."""
    from players.registry import weights_digest

    lines = []
    for player, digest in sorted(counts):
        try:
            now = weights_digest(player) or "none"
        except Exception as exc:  # a spec no longer loadable (an external model, a removed file)
            now = f"unknown ({type(exc).__name__})"
        lines.append(f"{player}: made with {digest}, now {now}: {'same' if now == digest else 'retrained'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="print the comparison with today's files, write nothing")
    args = parser.parse_args(argv)
    for folder in args.folders:
        counts = made_with(folder)
        if args.check:
            print("\n".join(f"{folder}: {line}" for line in check(counts)))
        else:
            write_text_atomic(folder / "WEIGHTS.md", note(folder, counts))
            print(f"wrote {folder / 'WEIGHTS.md'}: {len(counts)} player files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
