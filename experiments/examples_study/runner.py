"""The study: the planned trials, run in worker processes within --max-minutes, merged and reported."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clevr_game.errors import InputError, RunFailed

if TYPE_CHECKING:
    pass
from experiments.examples_study.options import LOCK_FILE, PIXEL_PLAYERS, StudyOptions, dataset_name
from experiments.examples_study.records import (
    check_settings,
    merge_records,
    read_records,
    trial_key,
    write_records,
)
from experiments.examples_study.report import write_report
from experiments.examples_study.trials import LoadedDataset, load_dataset, run_trial

# ------------------------------------------------------------------ the study


@dataclass(frozen=True)
class StudyOutcome:
    planned: int
    recorded: int
    ran: int
    complete: bool
    report: Path


def run_study(options: StudyOptions, log: Callable[[str], None] = print) -> StudyOutcome:
    """Every pending trial, trial by trial (then dataset, player, fraction), then the figure and the report.

    Trial-major order: a study cut by --max-minutes already covers every dataset and
    fraction with the trials it finished, and a later run adds the next ones.
    """
    from clevr_game.dataset import dataset_files

    for folder in options.data:  # a typo fails now, not after hours of other datasets' trials
        dataset_files(folder)
    _check_models(options)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    with sole_writer(out):
        return _run_study(options, out, log)


def sole_writer(out: Path) -> contextlib.AbstractContextManager[None]:
    """Hold `out`'s LOCK_FILE for the block; refuse in one line when another run holds it."""
    from clevr_game.folder_lock import sole_writer as folder_writer

    return folder_writer(out, "study run", lock_name=LOCK_FILE,
                         advice="wait for it to end, or run into another folder and --merge-from it afterwards")


def _run_study(options: StudyOptions, out: Path, log: Callable[[str], None]) -> StudyOutcome:
    import torch

    records = read_records(out)
    check_settings(records, options, out)
    merged = 0
    for folder in options.merge_from:
        added = merge_records(records, folder, options)
        log(f"merged {added} trials from {folder}")
        merged += added
    if merged:
        write_records(out, records)
    torch.set_num_threads(options.threads)
    planned = [(folder, player, fraction, trial) for trial in range(options.trials) for folder in options.data
               for player in options.players for fraction in options.fractions]
    pending = [p for p in planned if trial_key(dataset_name(p[0]), *p[1:]) not in records]
    log(f"{len(planned)} trials planned, {len(planned) - len(pending)} recorded, {len(pending)} to run"
        f"{' (--report-only: none now)' if options.report_only and pending else ''}")
    if options.report_only:
        pending = []
    if pending:
        log(plan_estimate([player for _, player, _, _ in pending], list(records.values())))
    note = precision_note({player for _, player, _, _ in pending}, options)
    if note:
        log(note)
    work = out / "work"
    deadline = None if options.max_minutes is None else time.time() + options.max_minutes * 60
    ran, complete = 0, True
    from tqdm import tqdm

    bar = tqdm(total=len(pending), desc="study", unit="trial", disable=None, leave=False)  # off when not a terminal
    for record in _pending_records(pending, options, work, deadline, log):
        if record is None:
            complete = False
            continue  # the trials still running meet the same deadline; their records are kept
        records[record["key"]] = record
        write_records(out, records)
        ran += 1
        bar.update()
        log(f"[{ran}/{len(pending)}] {record['dataset']} {record['player']} fraction {record['fraction']:g} "
            f"trial {record['trial']}: unseen accuracy {record['accuracy']:.4f} ({record['train_scenes']} train "
            f"scenes, {record['steps']} steps{', early stop' if record['stopped_early'] else ''}, "
            f"{record['seconds']:.0f} s)")
    bar.close()
    if complete:
        shutil.rmtree(work, ignore_errors=True)  # a cut run keeps its cut trials' checkpoints for the next
    if not complete:
        log(f"stopped at the --max-minutes limit ({options.max_minutes:g}); the same command continues the study")
    report = write_report(out, list(records.values()), options.command)
    done = sum(trial_key(dataset_name(p[0]), *p[1:]) in records for p in planned)
    return StudyOutcome(len(planned), done, ran, complete, report)


MEASURED_TRIAL_SECONDS = {"state-transformer": 189, "object-transformer": 280, "film": 378, "pixel-rn": 2423}
"""Mean seconds per trial of each player in the committed studies (results/examples-study*/study.jsonl, one
core per trial on this project's 2-core machines): the estimate before a folder has records of its own."""


def plan_estimate(pending_players: list[str], records: list[dict]) -> str:
    """One line: the trials to run and about how long, from this folder's own mean per player, else the committed one."""
    from collections import Counter

    own: dict[str, list[float]] = {}
    for record in records:
        own.setdefault(record.get("player", ""), []).append(float(record.get("seconds", 0.0)))
    parts, total, unknown = [], 0.0, []
    for player, count in sorted(Counter(pending_players).items()):
        measured = own.get(player)
        each = sum(measured) / len(measured) if measured else MEASURED_TRIAL_SECONDS.get(player)
        if each is None:
            unknown.append(player)
            continue
        total += each * count
        parts.append(f"{player} {count} x ~{each:.0f} s")
    line = f"plan: {len(pending_players)} trials, about {total / 3600:.1f} h of one core ({'; '.join(parts)})"
    return line + (f"; no measured time yet for {', '.join(unknown)}" if unknown else "")


def precision_note(players: set[str], options: StudyOptions) -> str | None:
    """A line for the log when a player's bfloat16 relations run as float32 products, on a CPU without bfloat16
    instructions (`players.pixel.models.bfloat16_linear`)."""
    import torch

    from players.pixel.models import cpu_computes_bfloat16

    low = sorted(player for player in players & set(options.pixel_players)
                 if options.pixel_model_config(player).get("relation_precision") == "bfloat16")
    if not low or cpu_computes_bfloat16():
        return None
    return (f"note: this CPU has no bfloat16 instructions ({torch.backends.cpu.get_cpu_capability()}): "
            f"{', '.join(low)} rounds its relations to bfloat16 as autocast does, with float32 products "
            "(docs/exhaustive.md, \"pixel-rn in bfloat16\")")


Planned = tuple[str, str, float, int]
"""(dataset folder, player, fraction, trial)."""

_loaded: LoadedDataset | None = None
"""The dataset of the last trial this process ran: trials run dataset by dataset, so it is loaded once per run."""


def run_planned(planned: Planned, options: StudyOptions, work: Path, deadline: float | None,
                log: Callable[[str], None] = print) -> dict[str, Any] | None:
    """One trial, in this process or a pool worker; None when `deadline` (time.time()) passes first."""
    global _loaded
    import torch

    def minutes_left() -> float | None:
        return None if deadline is None else (deadline - time.time()) / 60

    left = minutes_left()
    if left is not None and left <= 0:
        return None
    folder, player, fraction, trial = planned
    torch.set_num_threads(options.threads)
    if _loaded is None or _loaded.folder != folder:
        _loaded = None  # one dataset in memory at a time
        _loaded = load_dataset(folder, options.image_spec if options.pixel_players else None,
                               options.render_workers, log)
    left = minutes_left()  # again: rendering a dataset's images can take longer than the time left
    if left is not None and left <= 0:
        return None
    return run_trial(_loaded, player, fraction, trial, options, work, left)


def _pending_records(pending: list[Planned], options: StudyOptions, work: Path, deadline: float | None,
                     log: Callable[[str], None]) -> Iterator[dict[str, Any] | None]:
    """The pending trials' records (None for one cut by the deadline), in order or, with workers, as they end.

    Every trial is seeded by its own (seed, fraction, trial), so which process runs it
    changes nothing in its record but the seconds.
    """
    global _loaded
    if options.workers > 1 and options.pixel_players:
        from players.pixel.images import dataset_images

        # Rendered (and stacked) here, once: workers rendering the same missing images would race.
        for folder in dict.fromkeys(planned[0] for planned in pending):
            dataset_images(folder, options.image_spec, workers=options.render_workers, progress=True)
    try:
        if options.workers <= 1:
            for planned in pending:
                yield run_planned(planned, options, work, deadline, log)
            return
        # spawn: a forked child of a process that imported torch can hang.
        with ProcessPoolExecutor(options.workers, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(run_planned, planned, options, work, deadline): planned for planned in pending}
            failure: BaseException | None = None
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                try:
                    record = future.result()
                except BrokenProcessPool:
                    failure = failure or _worker_died(futures)
                    continue
                except Exception as exc:
                    # Stop as one process would, but keep the trials already running: their records are kept.
                    if failure is None:
                        failure = exc
                        for queued in futures:
                            queued.cancel()
                    continue
                yield record
            if failure is not None:
                raise failure
    finally:
        _loaded = None


def _worker_died(futures: dict[Future, Planned]) -> RunFailed:
    """The one-line error of a pool whose worker was killed (the system's out-of-memory killer, most often)."""
    broken = [planned for future, planned in futures.items()
              if future.done() and not future.cancelled() and isinstance(future.exception(), BrokenProcessPool)]
    folder, player, fraction, trial = broken[0] if broken else next(iter(futures.values()))
    return RunFailed(f"{dataset_name(folder)} {player} fraction {fraction:g} trial {trial}: a study worker process "
                     "died running it or a trial beside it (killed from outside, most likely for memory: see dmesg); "
                     "the finished trials are recorded: rerun with --workers 1 to continue")


def _check_models(options: StudyOptions) -> None:
    """Each player's model config builds, and the frozen perception of the players that read it was trained on
    the study's images."""
    from players.pixel.checkpoint import PLAYER_KINDS as PIXEL_KINDS
    from players.pixel.checkpoint import build_model as build_pixel_model
    from players.state.models import build_model
    from players.state.training import PLAYER_KINDS

    for player in options.players:
        try:
            if player in PIXEL_PLAYERS:
                build_pixel_model(PIXEL_KINDS[player], options.pixel_model_config(player), 4, 2)
            else:
                build_model(PLAYER_KINDS[player], options.model_config, 4, 2)
        except TypeError as exc:
            option = "--pixel-config" if player in PIXEL_PLAYERS else "--config"
            raise InputError(f"{option} for {player}: {exc}") from None
    perceiving = [player for player in options.pixel_players
                  if player == "object-transformer" or options.pixel_model_config(player).get("backbone") == "perception"]
    if perceiving:
        from players.pixel.checkpoint import load_player_file
        from players.pixel.object_training import DEFAULT_PERCEPTION_FILE
        from players.state.checkpoint import shipped_path

        perception = load_player_file(shipped_path(DEFAULT_PERCEPTION_FILE))
        if perception.image != options.image_spec:
            raise InputError(f"--players {perceiving[0]}: its perception (shipped {DEFAULT_PERCEPTION_FILE}) "
                             f"reads {perception.image.label} images, not {options.image_spec.label} "
                             "(--preset, --image-size)")


