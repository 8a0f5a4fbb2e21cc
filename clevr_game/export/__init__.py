"""Adversarial-training data export: attack runs -> a CLEVR-layout dataset of manipulated scenes.

Uses only the world (scenes, programs, datasets) and, when images are asked for,
the renderer, imported lazily.
"""

from clevr_game.export.pipeline import (
    MANIFEST_FILE,
    QUESTIONS_FILE,
    SCENES_FILE,
    ExportOptions,
    ExportSummary,
    export_run,
)
from clevr_game.export.records import Manipulation, manipulation_record, read_manipulations
from clevr_game.export.runs import run_folders
from clevr_game.export.selection import SELECTIONS
from clevr_game.run_files import MANIPULATIONS_FILE, RESULT_FILE, TRIALS_FILE

__all__ = [
    "MANIFEST_FILE", "MANIPULATIONS_FILE", "QUESTIONS_FILE", "RESULT_FILE", "SCENES_FILE", "SELECTIONS",
    "TRIALS_FILE", "ExportOptions", "ExportSummary", "Manipulation", "export_run", "manipulation_record",
    "read_manipulations", "run_folders",
]
