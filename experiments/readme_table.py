"""The compact Table 2 of the README and docs/table2.md: mean drop and its 95% CI per player, adversary and size.

Reads `table.json` and `table2.json` of a built report (`clevr-game report RESULTS` writes it), so the
headline figures come from the same numbers as `report.md`:

    python -m experiments.readme_table results/table2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

PLAYER_ORDER = ("state-transformer", "state-rn", "neuro-symbolic", "object-transformer", "film", "pixel-rn")
ADVERSARY_ROWS = (("trained", "state A2C"), ("trained-pixel", "pixel A2C"), ("random-valid", "random valid"),
                  ("search", "greedy search"))
SIZES = (10, 100, 1000)


def _drop_cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "(not yet run)"
    drop = row["drop"]
    if row["trials"] < 2:
        return f"{drop['mean']:.3f}"
    low, high = drop["ci95"]
    return f"{drop['mean']:.3f} [{low:.3f}, {high:.3f}]"


def readme_table(rows: list[dict[str, Any]], clean_accuracy: dict[str, float]) -> str:
    """Markdown rows: per player its clean accuracy on the pool, then one line per adversary.

    `clean_accuracy` is the report's (table2.json, question 3): each distinct mini-game
    weighed by its items, so the size-1000 mini-game counts for what it holds.
    """
    cells = {(r["player"], r["adversary"], r["size"]): r for r in rows}
    players = [p for p in PLAYER_ORDER if any(key[0] == p for key in cells)]
    players += sorted({key[0] for key in cells} - set(players))
    lines = ["| player | clean acc. | adversary | drop, size 10 | size 100 | size 1000 | worst mini-game |",
             "|---|---|---|---|---|---|---|"]
    for player in players:
        for index, (adversary, label) in enumerate(ADVERSARY_ROWS):
            found = [cells.get((player, adversary, size)) for size in SIZES]
            worst = max((r["drop"]["max_over_minigames"] for r in found if r is not None), default=None)
            accuracy = f"{clean_accuracy[player]:.3f}" if player in clean_accuracy and index == 0 else ""
            lines.append(f"| {player if index == 0 else ''} | {accuracy} | {label} | "
                         + " | ".join(_drop_cell(r) for r in found)
                         + f" | {'' if worst is None else f'{worst:.3f}'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a benchmark folder with a built report (table.json)")
    args = parser.parse_args(argv)
    rows = _read(Path(args.results) / "table.json", args.results)
    answers = _read(Path(args.results) / "table2.json", args.results)
    if not isinstance(rows, list) or not isinstance(answers, dict):
        raise SystemExit(f"{args.results}: table.json or table2.json is not a built report's")
    print(readme_table(rows, clean_accuracies(answers)), end="")
    return 0


def clean_accuracies(answers: dict[str, Any]) -> dict[str, float]:
    """Each player's clean accuracy as the report's question 3 weighs it (any adversary: the items are the same)."""
    found: dict[str, float] = {}
    for adversary in answers.get("3_accuracy_vs_robustness", {}).get("adversaries", {}).values():
        for player, figures in adversary.get("players", {}).items():
            found.setdefault(player, figures["clean_accuracy"])
    return found


def _read(path: Path, results: str) -> Any:
    if not path.is_file():
        raise SystemExit(f"{path}: no such file (build the report first: clevr-game report {results})")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise SystemExit(f"{path}: not JSON ({error.msg} at line {error.lineno})") from None


if __name__ == "__main__":
    raise SystemExit(main())
