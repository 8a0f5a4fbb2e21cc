"""`clevr-game export`: attack runs -> a CLEVR-layout dataset of the manipulated scenes.

Steps: find the finished runs, read their manipulations (every valid move when the
run recorded them in manipulations.jsonl, else the best move per item), keep the selected ones, re-verify each
against its item, drop duplicates, optionally keep a seeded random subset, render
the images when asked, and write scenes.json, questions.json and manifest.json
(each atomically; the manifest last, so its presence means a complete export).

An empty selection is an error (one line, nothing written): an empty training set
is never what the caller wanted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from clevr_game.errors import InputError
from clevr_game.export.images import IMAGES_DIR, image_size, remove_stale_images, render_images
from clevr_game.export.items import ItemCatalogue
from clevr_game.export.layout import MANIFEST_VERSION, ExportEntry, assemble, info
from clevr_game.export.records import Manipulation
from clevr_game.export.runs import AttackRun, load_run, run_folders
from clevr_game.export.selection import DESCRIPTIONS, SELECTIONS, selected
from clevr_game.export.verify import verified_scene
from clevr_game.run_files import MANIPULATIONS_FILE, TRIALS_FILE
from clevr_game.scene import save_scenes, write_json_atomic

SCENES_FILE = "scenes.json"
QUESTIONS_FILE = "questions.json"
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class ExportOptions:
    run: str | os.PathLike[str]
    """An attack run folder (result.json) or a benchmark results folder (trials.jsonl)."""
    out: str | os.PathLike[str]
    select: str = "flips"
    split: str = "adversarial"
    render: str | None = None
    """A render preset (fast, balanced, clevr) or None for no images."""
    render_workers: int = 1
    items: str | os.PathLike[str] | None = None
    """The items folder, when not where the run's options.items says."""
    limit: int | None = None
    """Keep at most this many questions, drawn at random with `seed`."""
    seed: int = 0
    progress: bool = False


@dataclass
class ExportSummary:
    out: Path
    runs: int
    candidates: int
    duplicates: int
    scenes: int
    questions: int
    images: int
    warnings: list[str] = field(default_factory=list)

    def last_line(self) -> str:
        return f"scenes: {self.scenes} questions: {self.questions} images: {self.images}"


def _check_options(options: ExportOptions) -> None:
    if options.select not in SELECTIONS:
        raise InputError(f"unknown selection {options.select!r} (expected one of {', '.join(SELECTIONS)})")
    if not options.split or not options.split.replace("_", "").replace("-", "").isalnum():
        raise InputError(f"split {options.split!r} must be letters, digits, '-' or '_' (it names the image files)")
    if options.limit is not None and options.limit < 1:
        raise InputError(f"limit must be at least 1, got {options.limit}")
    if options.render_workers < 1:
        raise InputError(f"render workers must be at least 1, got {options.render_workers}")


def _manipulations(run: AttackRun, select: str, warnings: list[str]) -> Iterator[Manipulation]:
    # Every recorded move when the run kept them (flips and drops too: more data than one per item).
    every = run.every_valid_move()
    if every is not None:
        return every
    if select == "all":
        warnings.append(
            f"{run.folder}: no {MANIPULATIONS_FILE} (the attack kept only its best move per item); "
            "exporting the best manipulation per item"
        )
    return run.best()


def _limited(entries: list[ExportEntry], limit: int | None, seed: int) -> list[ExportEntry]:
    if limit is None or limit >= len(entries):
        return entries
    chosen = np.random.default_rng(seed).choice(len(entries), size=limit, replace=False)
    return [entries[i] for i in sorted(chosen.tolist())]  # keep the runs' order


def export_run(options: ExportOptions) -> ExportSummary:
    """Write the export of `options.run` into `options.out`; InputError (one line) when nothing qualifies."""
    _check_options(options)
    width, height = image_size(options.render)
    folders = run_folders(options.run)
    if not folders:
        raise InputError(f"{options.run}: no finished trial in {TRIALS_FILE} (every trial failed)")
    catalogue = ItemCatalogue()
    warnings: list[str] = []
    entries: list[ExportEntry] = []
    seen: set = set()
    candidates = duplicates = 0
    for folder in folders:
        run = load_run(folder, options.items)
        for record in _manipulations(run, options.select, warnings):
            if not selected(record, options.select):
                continue
            candidates += 1
            source = catalogue.get(run.items, record.item_id, record.where)
            entry = ExportEntry(record, source, verified_scene(record, source, width, height), folder, run.player)
            key = entry.question_key()
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            entries.append(entry)
    if not entries:
        raise InputError(
            f"{options.run}: nothing to export: no {DESCRIPTIONS[options.select]} in {len(folders)} run(s) "
            f"(--select {options.select}); nothing written"
        )
    dataset = assemble(_limited(entries, options.limit, options.seed), options.split)

    out = Path(options.out)
    images = out / IMAGES_DIR
    names = dataset.image_names
    remove_stale_images(images, options.split, set(names) if options.render else set())
    if options.render:
        render_images(dataset.scenes, names, images, options.render, workers=options.render_workers,
                      progress=options.progress, report=warnings.append)
    save_scenes(out / SCENES_FILE, dataset.scenes, info(options.split))
    write_json_atomic(out / QUESTIONS_FILE, {"info": info(options.split), "questions": dataset.questions})
    write_json_atomic(out / MANIFEST_FILE, {
        "info": {
            **info(options.split),
            "manifest_version": MANIFEST_VERSION,
            "select": options.select,
            "runs": [str(f) for f in folders],
            "candidates": candidates,
            "duplicates": duplicates,
            "limit": options.limit,
            "seed": options.seed,
            "images": options.render,
            "image_size": [width, height],
        },
        "entries": dataset.manifest,
    }, indent=1)
    return ExportSummary(out, len(folders), candidates, duplicates, len(dataset.scenes),
                         len(dataset.questions), len(names) if options.render else 0, warnings)
