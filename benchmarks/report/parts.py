"""Everything one report shows, gathered once and written into both pages."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReportParts:
    rows: list[dict]
    failed: list[dict]
    family_rows: list[dict]
    kind_rows: list[dict]
    answers: dict = field(default_factory=dict)
    figures: dict[str, bool] = field(default_factory=dict)
    unlabelled_items: int = 0
    records_without_items: int = 0
    """Finished trials with neither per-item results in their record nor a run folder (older records)."""
    curves: bool = False
    curve_text: list[str] = field(default_factory=list)
    gallery: list[dict] = field(default_factory=list)
    gallery_note: str | None = None
    run_info: dict | None = None
    """What made the trials (benchmarks.provenance): command, options, version, commit, date, cores."""


def json_text(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


