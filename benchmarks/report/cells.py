"""Table cells and one-line texts: intervals, p-values, errors, failed trials, gallery captions."""

from __future__ import annotations

# ------------------------------------------------------------------ text


def interval(summary: dict) -> str:
    low, high = summary["ci95"]
    return f"{summary['mean']:.3f} [{low:.3f}, {high:.3f}]"


def p_text(value: float) -> str:
    return "n/a" if value != value else f"{value:.2g}"


TABLE_HEADER = ["player", "size", "adversary", "consistency (mean, 95% CI)", "max", "p", "drop (mean, 95% CI)",
           "max", "p", "drop p vs random", "clean acc.", "player errors", "trials"]


def row_cells(row: dict) -> list[str]:
    c, d = row["consistency"], row["drop"]
    return [row["player"], str(row["size"]), row["adversary"], interval(c), f"{c['max_over_minigames']:.3f}",
            p_text(c["p_value"]), interval(d), f"{d['max_over_minigames']:.3f}", p_text(d["p_value"]),
            p_text(row["drop_p_vs_random"]) if "drop_p_vs_random" in row else "",
            f"{row['clean_accuracy']:.3f}", _errors(row), str(row["trials"])]


def breakdown_header(key: str) -> list[str]:
    return ["player", key, "consistency (mean, 95% CI)", "drop (mean, 95% CI)", "item results (items)"]


def breakdown_cells(row: dict, key: str) -> list[str]:
    return [row["player"], row[key], interval(row["consistency"]), interval(row["drop"]),
            f"{row['items']} ({row['distinct_items']})"]


def fragile_lines(rows: list[dict], key: str) -> list[str]:
    """Per player, the family (or kind) with the highest drop, else the highest consistency."""
    lines = []
    for player in sorted({r["player"] for r in rows}):
        mine = [r for r in rows if r["player"] == player]
        worst = max(mine, key=lambda r: (r["drop"]["mean"], r["consistency"]["mean"]))
        if worst["consistency"]["mean"] == 0:
            lines.append(f"{player}: no {key} had an answer changed.")
        else:
            lines.append(f"{player}: most fragile {key} {worst[key]} (drop {worst['drop']['mean']:.3f}, "
                         f"consistency {worst['consistency']['mean']:.3f}, {worst['items']} item results).")
    return lines


def _errors(row: dict) -> str:
    queries = row.get("player_queries", 0)
    if not queries:
        return "n/a"
    unscored = row.get("unscored_items", 0)
    return f"{row['player_errors']} ({row['player_errors'] / queries:.2%})" + (
        f"; {unscored} items unscored" if unscored else "")


def failed_line(record: dict) -> str:
    rate = record.get("player_error_rate")
    counted = f" ({record['player_errors']} of {record['player_queries']} queries failed)" if rate is not None else ""
    return f"{record['trial']}: {record['error']}{counted}"


def gallery_line(entry: dict) -> str:
    outcome = "right answer broken" if entry["dropped"] else "answer changed"
    return (f"{entry['player']}, item {entry['item_id']} ({entry['trial']}): {entry['question']} "
            f"true answer: {entry['true']}; before: {entry['old']}; after: {entry['new']} ({outcome}); "
            f"moved: {', '.join(entry['moved'])}")




def provenance_lines(info: dict) -> list[tuple[str, str]]:
    """(term, text) of a run_info.json: the command, options, version, commit, date and cores that made the trials."""
    options = ", ".join(f"{k}={v}" for k, v in sorted(info.get("options", {}).items()) if v is not None)
    return [("command", f"`{info.get('command', '?')}`"), ("options", options or "none"),
            ("clevr-game version", str(info.get("version", "unknown"))),
            ("commit", str(info.get("commit") or "unknown (not a git checkout)")),
            ("date", str(info.get("date", "unknown"))), ("cores", str(info.get("cores", "unknown")))]
