"""Every hot path of the project in one table, each against its baseline measured in the same run.

Run: python -m perf [--quick] [--only programs,env,...] [--json FILE]
docs/performance.md's table (and the README's few rows) are copied from this output.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time

from perf.timing import print_table

SUITES = ("generate", "programs", "questions", "asp", "env", "adversary", "render", "exhaustive", "players")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", default=",".join(SUITES), help="comma-separated suites")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()
    rows: list[dict] = []
    for name in args.only.split(","):
        module = importlib.import_module(f"perf.{name}")
        started = time.perf_counter()
        try:
            suite_rows = module.run(quick=args.quick)
        except Exception as exc:  # one suite failing (e.g. no shipped weights yet) must not hide the others
            print(f"{name}: not measured: {type(exc).__name__}: {exc}")
            continue
        for r in suite_rows:
            r.setdefault("goal", "")
            r["suite"] = name
        rows.extend(suite_rows)
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)
    print()
    print_table(rows)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
