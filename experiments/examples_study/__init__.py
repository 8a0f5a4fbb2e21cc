"""How many manipulated scenes must a player train on to answer every unseen one? (the paper's Figure 2)

For each dataset (a `clevr-game exhaustive` folder), player, training fraction
and trial: a random split of the dataset's *scenes* (all questions of a scene
on one side), a fresh model trained on the train part with its player's trainer
(`players.state.training.train` or `players.pixel.training.train_pixel`: a step
budget, early stopping on a validation slice of the train part, the best
validation weights kept), and its accuracy on the unseen scenes. The splits
depend on (seed, fraction, trial) only, so every player sees the same ones.

Pixel players see the dataset's images, rendered once per dataset and image
spec into the dataset's image cache (`players.pixel.images`) and read back by
every later trial and run.

    clevr-game study examples --data runs/exhaustive/2-mix,runs/exhaustive/3-mix         --players state-transformer --fractions 0.01,0.05,0.1,0.25,0.5,0.75,0.9 --trials 10         --out results/examples-study
    clevr-game study examples --data runs/exhaustive/2-one --players film,pixel-rn,object-transformer         --fractions 0.1,0.5 --trials 3 --out results/examples-study-pixel

RESULTS/study.jsonl holds one record per (dataset, player, fraction, trial),
rewritten atomically after each; a rerun skips the recorded ones (and refuses
other training settings). RESULTS/figure.png plots unseen accuracy against the
training fraction and against the scenes trained on, with 95% intervals over
trials; RESULTS/report.md has the table and the smallest fraction whose mean
unseen accuracy reaches 99%.
`--max-minutes` bounds the whole run: the trial cut by the limit is not
recorded yet; its checkpoint stays in RESULTS/work, and the same command
continues it from there (as it does a trial whose run was killed, from its
last checkpoint, taken every TRIAL_CHECKPOINT_MINUTES). A resumed trial's
record is the one an uncut run gives; its `seconds` add the training time of
the runs before.

A trial's record does not depend on the process that ran it (only `seconds`
does), so one study can be shared out: several processes or machines run the
same command with different `--data` into their own folders, and
`--merge-from FOLDER` adds their records to RESULTS (refusing other settings,
or a trial recorded twice with different results). One run at a time writes a
results folder (LOCK_FILE).

The modules, read in this order: `options`, `records` (splits and records), `trials` (one
trial), `report` (figure and report.md), `runner` (the study).
"""

from experiments.examples_study.options import (
    FIGURE_FILE,
    LOCK_FILE,
    PIXEL_PLAYERS,
    REFUSED_PLAYERS,
    REPORT_FILE,
    RESULTS_FILE,
    STATE_PLAYERS,
    STUDY_MIN_STEP_SHARES,
    STUDY_PIXEL_CONFIGS,
    SUPERSEDED_FILE,
    TARGET_ACCURACY,
    TRIAL_CHECKPOINT_MINUTES,
    TRIAL_FILE,
    VOLATILE_TRAINING_OPTIONS,
    StudyOptions,
    dataset_name,
)
from experiments.examples_study.records import (
    SceneSplit,
    check_settings,
    merge_records,
    questions_of,
    read_records,
    runs_as_under_min_steps,
    split_scenes,
    trial_key,
    write_records,
)
from experiments.examples_study.report import (
    Point,
    budget_bound,
    plot,
    smallest_fraction,
    summarise,
    write_report,
)
from experiments.examples_study.runner import (
    MEASURED_TRIAL_SECONDS,
    Planned,
    StudyOutcome,
    plan_estimate,
    precision_note,
    run_planned,
    run_study,
    sole_writer,
)
from experiments.examples_study.trials import (
    LoadedDataset,
    load_dataset,
    resumable,
    run_pixel_trial,
    run_trial,
)

__all__ = ["FIGURE_FILE", "LOCK_FILE", "LoadedDataset", "MEASURED_TRIAL_SECONDS", "PIXEL_PLAYERS", "Planned", "Point", "REFUSED_PLAYERS", "REPORT_FILE", "RESULTS_FILE", "STATE_PLAYERS", "STUDY_MIN_STEP_SHARES", "STUDY_PIXEL_CONFIGS", "SUPERSEDED_FILE", "SceneSplit", "StudyOptions", "StudyOutcome", "TARGET_ACCURACY", "TRIAL_CHECKPOINT_MINUTES", "TRIAL_FILE", "VOLATILE_TRAINING_OPTIONS", "budget_bound", "check_settings", "dataset_name", "load_dataset", "merge_records", "plan_estimate", "plot", "precision_note", "questions_of", "read_records", "resumable", "run_pixel_trial", "run_planned", "run_study", "run_trial", "runs_as_under_min_steps", "smallest_fraction", "sole_writer", "split_scenes", "summarise", "trial_key", "write_records", "write_report"]
