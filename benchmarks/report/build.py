"""build_report: trials.jsonl (and the run folders, when there) to report.md, report.html, the tables and figures."""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchmarks import table2
from benchmarks.gallery import SCHEMATIC, draw_gallery, pick
from benchmarks.provenance import read_run_info
from benchmarks.records import FINISHED_FIELDS, TRIALS_FILE, read_trials
from benchmarks.report.figures import (
    accuracy_plot,
    curve_account,
    curve_plot,
    family_plot,
    input_plot,
    manipulation_plot,
    size_plot,
)
from benchmarks.report.pages import html_page, markdown_page
from benchmarks.report.parts import ReportParts, json_text
from benchmarks.report.runs import FinishedRun, finished_runs, gallery_candidates, item_rows
from benchmarks.stats import breakdown, table
from clevr_game.atomic import write_text_atomic
from clevr_game.errors import InputError

GALLERY_PRESETS = ("fast", "balanced", "clevr", SCHEMATIC)

# ------------------------------------------------------------------ the whole report


def build_report(results: str | os.PathLike[str], *, gallery_preset: str = "fast") -> tuple[Path, Path]:
    """Write RESULTS/report.md, report.html, table.json, families.json and the figures; returns both pages."""
    if gallery_preset not in GALLERY_PRESETS:
        raise InputError(f"unknown gallery preset {gallery_preset!r} (expected one of {', '.join(GALLERY_PRESETS)})")
    folder = Path(results)
    records = sorted(read_trials(folder).values(), key=lambda r: r["trial"])
    if not records:
        raise InputError(f"{folder}: no trials.jsonl with finished trials (run `clevr-game benchmark` first)")
    ok = [r for r in records if "error" not in r]
    failed = [r for r in records if "error" in r]
    for record in ok:
        missing = [field for field in FINISHED_FIELDS if field not in record]
        if missing:
            raise InputError(f"{folder / TRIALS_FILE}: trial {record['trial']}: a finished trial without "
                             f"{', '.join(repr(f) for f in missing)}")
    rows = table(ok)
    write_text_atomic(folder / "table.json", json_text(rows))
    runs = finished_runs(folder, ok)
    per_item = item_rows(ok, runs)
    by_family, by_kind = breakdown(per_item, "family"), breakdown(per_item, "kind")
    write_text_atomic(folder / "families.json", json_text({"family": by_family, "kind": by_kind}))
    answers = table2.answers(ok, per_item)
    write_text_atomic(folder / "table2.json", json_text(answers))
    parts = ReportParts(rows=rows, failed=failed, family_rows=by_family, kind_rows=by_kind, answers=answers,
                        unlabelled_items=sum(r["family"] == "unknown" for r in per_item),
                        records_without_items=sum("item_results" not in r and r["trial"] not in
                                                  {run.record["trial"] for run in runs} for r in ok),
                        run_info=read_run_info(folder))
    if ok:
        size_plot(rows, folder / "drop_by_size.png")
        parts.curves = curve_plot(ok, folder / "learning_curves.png")
        parts.curve_text = curve_account(ok)
        parts.figures["adversary_inputs"] = input_plot(ok, folder / "adversary_inputs.png")
        parts.figures["accuracy_vs_robustness"] = accuracy_plot(answers["3_accuracy_vs_robustness"],
                                                                folder / "accuracy_vs_robustness.png")
        parts.figures["manipulation_sizes"] = manipulation_plot(answers["5_manipulation_sizes"],
                                                                folder / "manipulation_sizes.png")
    if by_family:
        family_plot(by_family, by_kind, folder / "families.png")
    parts.gallery, parts.gallery_note = _gallery(folder, runs, rows, gallery_preset)
    write_text_atomic(folder / "report.md", markdown_page(parts))
    write_text_atomic(folder / "report.html", html_page(parts))
    return folder / "report.md", folder / "report.html"

GALLERY_FILE = "gallery.json"


def _gallery(folder: Path, runs: list[FinishedRun], rows: list[dict], preset: str) -> tuple[list[dict], str | None]:
    """Draw the gallery from the run folders; without them, keep the one gallery.json describes."""
    if not runs:
        kept = folder / GALLERY_FILE
        if kept.is_file():
            saved = json.loads(kept.read_text(encoding="utf-8"))
            if all((folder / entry["image"]).is_file() for entry in saved["entries"]):
                return saved["entries"], saved["note"]
        return [], ("The gallery is drawn from the trials' run folders (runs/TRIAL/result.json), which are not "
                    "here, and no earlier gallery was kept.")
    entries, note = draw_gallery(pick(gallery_candidates(runs, rows), one_per_player=True), folder, preset)
    if entries and note is None and preset != SCHEMATIC:
        note = f"Rendered with the `{preset}` preset of the game's Blender renderer."
    write_text_atomic(folder / GALLERY_FILE, json_text({"entries": entries, "note": note}))
    return entries, note


