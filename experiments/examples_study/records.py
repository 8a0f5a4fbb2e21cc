"""Scene splits by (seed, fraction, trial), and the study's records: read, written, checked, merged."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clevr_game.atomic import write_text_atomic
from clevr_game.errors import InputError

if TYPE_CHECKING:
    pass
from experiments.examples_study.options import RESULTS_FILE, SUPERSEDED_FILE, StudyOptions

# ------------------------------------------------------------------ splits


@dataclass(frozen=True)
class SceneSplit:
    """Scene rows (positions in the dataset's scenes) of each part; disjoint, together every scene with a question."""

    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray


def split_scenes(scenes: np.ndarray, fraction: float, trial: int, seed: int, validation_share: float,
                 max_validation_scenes: int | None = None) -> SceneSplit:
    """`fraction` of `scenes` to train on (a `validation_share` slice of them for early stopping), the rest unseen."""
    # Seeded by (seed, fraction, trial) only: every player and every rerun gets the same split.
    rng = np.random.default_rng([seed, round(fraction * 1_000_000), trial])
    order = rng.permutation(scenes)
    trained = int(round(fraction * len(scenes)))
    if trained < 2 or trained >= len(scenes):
        raise InputError(f"--fractions {fraction:g}: {trained} of {len(scenes)} scenes to train on "
                         "(need at least 2, one of them for validation, and one unseen scene)")
    validation = min(max(1, int(round(validation_share * trained))), trained - 1)
    if max_validation_scenes is not None:
        validation = min(validation, max_validation_scenes)
    return SceneSplit(np.sort(order[validation:trained]), np.sort(order[:validation]), np.sort(order[trained:]))


def questions_of(tensors: Any, scene_rows: np.ndarray) -> Any:
    """The questions of `tensors` (players.state.data.QuestionTensors) asked about `scene_rows`, all of them."""
    import torch

    from players.state.data import QuestionTensors

    chosen = torch.from_numpy(np.flatnonzero(np.isin(tensors.scene_of.numpy(), scene_rows)))
    return QuestionTensors(tensors.positions, tensors.attributes, tensors.present, tensors.scene_of[chosen],
                           tensors.words[chosen], tensors.lengths[chosen], tensors.answers[chosen],
                           tensors.families[chosen], tensors.family_names)


# ------------------------------------------------------------------ records


def trial_key(dataset: str, player: str, fraction: float, trial: int) -> str:
    return f"{dataset}__{player}__f{fraction:g}__t{trial}"


def read_records(out: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Recorded trials by key."""
    from benchmarks.records import read_keyed_lines

    return read_keyed_lines(Path(out) / RESULTS_FILE, "key")


def write_records(out: str | os.PathLike[str], records: dict[str, dict[str, Any]]) -> None:
    lines = [json.dumps(records[key], sort_keys=True) for key in sorted(records)]
    write_text_atomic(Path(out) / RESULTS_FILE, "".join(f"{line}\n" for line in lines))


def check_settings(records: dict[str, dict[str, Any]], options: StudyOptions, out: Path) -> None:
    for record in records.values():
        wanted = options.settings(record.get("player"))
        for key, value in record.get("settings", {}).items():
            if key != "min_steps" and key in wanted and wanted[key] != value:
                raise InputError(f"{out / RESULTS_FILE}: recorded with {key}={value!r}, not {wanted[key]!r} "
                                 "(a study continues with its own settings; use another --out)")
        minimum = wanted.get("min_steps", 0)
        if not runs_as_under_min_steps(record, minimum):
            raise InputError(f"{out / RESULTS_FILE}: trial {record['key']} was recorded with min_steps="
                             f"{record.get('settings', {}).get('min_steps', 0)} and stopped at step {record['steps']}; its "
                             f"player's trials now train at least {minimum} steps (move its line out of "
                             f"{RESULTS_FILE}, into {SUPERSEDED_FILE} say, and the study runs it again)")


def runs_as_under_min_steps(record: dict[str, Any], minimum: int) -> bool:
    """Whether `record`'s trial is the one a run with early stopping held off until step `minimum` gives.

    A run recorded under a lower minimum that did not stop before `minimum` is: the
    minimum only holds back stops, and this run met none before it.
    """
    recorded = record.get("settings", {}).get("min_steps", 0)
    if recorded == minimum:
        return True
    return recorded < minimum and (not record["stopped_early"] or record["steps"] >= minimum)


_RUN_FIELDS = ("seconds", "data")
"""What may differ between two runs of the same trial: its time and where its dataset folder lay."""


def merge_records(records: dict[str, dict[str, Any]], folder: str | os.PathLike[str],
                  options: StudyOptions) -> int:
    """Add `folder`'s recorded trials (another run of this study) to `records`; the number added.

    A trial recorded on both sides must agree in everything but `_RUN_FIELDS`: a
    difference means the two runs did not train the same thing.
    """
    folder = Path(folder)
    if not (folder / RESULTS_FILE).is_file():
        raise InputError(f"--merge-from {folder}: no {RESULTS_FILE} there")
    theirs = read_records(folder)
    check_settings(theirs, options, folder)
    added = 0
    for key, record in theirs.items():
        ours = records.get(key)
        if ours is None:
            records[key] = record
            added += 1
            continue
        differing = sorted(name for name in ours.keys() | record.keys()
                           if name not in _RUN_FIELDS and ours.get(name) != record.get(name))
        if differing:
            raise InputError(f"--merge-from {folder / RESULTS_FILE}: trial {key} is recorded there with another "
                             f"{', '.join(differing)} than in {options.out} (not the same study)")
    return added


