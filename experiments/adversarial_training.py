"""`clevr-game adversarial-training`: attack a player, export what fooled it, fine-tune on it, attack again.

The experiment folder EXP holds every step, and a rerun skips the steps already done:

1. `before/`: the benchmark (`run_plan`) of the player on mini-games 0..M-1 of the
   items' split (split seed `split_seed`).
2. `export/`: those runs' manipulations as a CLEVR-layout dataset (`export_run`).
3. `finetuned.pt`: a copy of the player file fine-tuned on the items' clean
   questions plus the export (checkpointed, so an interrupted fine-tune resumes).
4. `after/`: the benchmark of the original and of the fine-tuned player on the
   *fresh* mini-games M..2M-1 of the same split: none of their items was
   attacked or exported, and both players meet the very same mini-games.
5. `report.md` and `summary.json`: clean accuracy (held-out set, items,
   mini-games) and the trained adversary's consistency and drop (means with
   bootstrap CIs from benchmarks.stats), before and after.

The player is a state player (`state-transformer`, `state-rn`) or a pixel
player that answers from the image (`film`, `pixel-rn`), shipped or
`file:PATH`. A pixel player is fine-tuned by the pixel trainer
(`players.pixel.training`, as `players train --init --extra` does) on images
rendered with its own spec (preset and size, from its player file) and kept
where pixel training keeps them, in each dataset's `cache/images/`
(`players.pixel.images`: missing images rendered by Blender workers, a scene
drawn before copied from the render cache). A dataset outside EXP (the item
pool, a given held-out set) is first copied into `EXP/pixel-data/` (its two
JSON files), so those renders never land beside a pool that must stay as it
is, such as a results folder's. Its clean accuracy is asked on those renders
(`players.pixel.evaluation`), and its benchmark stages check visibility, as
the benchmark does for every player that sees images.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clevr_game.atomic import write_json_atomic, write_text_atomic
from clevr_game.errors import ClevrGameError, InputError

HELDOUT_SCENES = 100
HELDOUT_QUESTIONS_PER_SCENE = 5
HELDOUT_SEED = 90_001
"""The generated held-out set's seed: far from the small seeds that training sets are usually made with."""

REPORT_FILE = "report.md"
SUMMARY_FILE = "summary.json"
PIXEL_DATA_DIR = "pixel-data"
"""EXP's copies of the datasets outside EXP that a pixel player's images are rendered for."""
STATE_TRAINERS = ("state-transformer", "state-rn")
PIXEL_TRAINERS = ("film", "pixel-rn")
"""Players this experiment fine-tunes: the `players train --player` names."""


@dataclass(frozen=True)
class AdversarialTrainingOptions:
    player: str
    """state-transformer, state-rn, film, pixel-rn (the shipped files) or file:PATH (a player file of one
    of those kinds)."""
    items: str
    out: str
    heldout: str | None = None
    """A clean held-out dataset folder; default: one generated in EXP/heldout."""
    size: int = 10
    minigames: int = 2
    seeds: int = 1
    steps: int = 20_000
    finetune_steps: int = 500
    finetune_batch_size: int = 64
    finetune_learning_rate: float = 1e-4
    select: str = "flips"
    split_seed: int = 0
    seed: int = 0
    num_envs: int = 128
    eval_samples: int = 32
    search_budget: int = 0
    adversary_weights: str | None = None
    workers: int = 1
    """Local processes running trials; for a pixel player also the Blender workers rendering its images."""
    threads: int = 1
    progress: bool = True

    @property
    def folder(self) -> Path:
        return Path(self.out)

    @property
    def finetuned(self) -> Path:
        return self.folder / "finetuned.pt"

    @property
    def finetuned_player(self) -> str:
        from players.registry import PLAYER_FILE_PREFIX

        return f"{PLAYER_FILE_PREFIX}{self.finetuned}"

    def plan(self, stage: str, players: list[str]) -> Any:
        from benchmarks.trials import Plan

        return Plan(players=players, items=self.items, sizes=[self.size], minigames=self.minigames,
                    seeds=self.seeds, steps=self.steps, out=str(self.folder / stage), num_envs=self.num_envs,
                    eval_samples=self.eval_samples, search_budget=self.search_budget,
                    split_seed=self.split_seed, adversary_weights=self.adversary_weights)


@dataclass(frozen=True)
class SourcePlayer:
    """The player file an experiment fine-tunes."""

    path: Path
    trainer: str
    """Its `players train --player` name: one of STATE_TRAINERS or PIXEL_TRAINERS."""
    image: Any = None
    """A pixel player's ImageSpec (render preset and size, from its file); None for a state player."""

    @property
    def pixel(self) -> bool:
        return self.image is not None

    def load_file(self, path: str | Path) -> Any:
        """The player file at `path` read with this kind's reader (a fine-tuned copy, say)."""
        if self.pixel:
            from players.pixel.checkpoint import load_player_file
        else:
            from players.state.checkpoint import load_player_file
        return load_player_file(path)


def source_player(spec: str) -> SourcePlayer:
    """The player behind a player spec that can be fine-tuned here; InputError (one line) for any other."""
    from players.pixel.player import FiLMPlayer, PixelRelationNetworkPlayer
    from players.registry import PLAYER_FILE_PREFIX
    from players.state.checkpoint import shipped_path
    from players.state.player import StateRelationNetworkPlayer, StateTransformerPlayer

    classes = (StateTransformerPlayer, StateRelationNetworkPlayer, FiLMPlayer, PixelRelationNetworkPlayer)
    shipped = {cls.default_name: cls.shipped_file for cls in classes}
    if spec.startswith(PLAYER_FILE_PREFIX):
        path = Path(spec[len(PLAYER_FILE_PREFIX):])
        if not path.is_file():
            raise InputError(f"--player {spec}: no such player file")
    elif spec in shipped:
        path = shipped_path(shipped[spec])
    else:
        raise InputError(f"--player {spec!r}: fine-tuning needs a state player or a pixel player that answers "
                         f"from the image: {', '.join(shipped)} or {PLAYER_FILE_PREFIX}PATH")
    return _player_in_file(spec, path)


def _player_in_file(spec: str, path: Path) -> SourcePlayer:
    from players.pixel.checkpoint import FORMAT as PIXEL_FORMAT
    from players.pixel.checkpoint import PLAYER_KINDS as PIXEL_KINDS
    from players.pixel.checkpoint import from_dict as pixel_file
    from players.state.checkpoint import from_dict as state_file
    from players.state.checkpoint import read_torch
    from players.state.training import PLAYER_KINDS as STATE_KINDS

    data = read_torch(path, "player file")
    if isinstance(data, dict) and data.get("format") == PIXEL_FORMAT:
        pixel = pixel_file(data, str(path))
        trainer = next((name for name in PIXEL_TRAINERS if PIXEL_KINDS[name] == pixel.kind), None)
        if trainer is None:
            raise InputError(f"--player {spec}: {path} holds a {pixel.kind!r} pixel model; fine-tuning here "
                             f"takes the pixel players that answer from the image: {', '.join(PIXEL_TRAINERS)}")
        return SourcePlayer(path, trainer, pixel.image)
    state = state_file(data, str(path))  # a one-line InputError for a file of neither format
    trainer = next((name for name, kind in STATE_KINDS.items() if kind == state.kind), None)
    if trainer is None:
        raise InputError(f"--player {spec}: {path} holds a {state.kind!r} model that cannot be fine-tuned here")
    return SourcePlayer(path, trainer)


def _check(options: AdversarialTrainingOptions) -> None:
    from clevr_game.export import SELECTIONS

    for name in ("size", "minigames", "seeds", "steps", "finetune_steps", "finetune_batch_size", "num_envs",
                 "eval_samples", "workers", "threads"):
        if getattr(options, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(options, name)}")
    if options.finetune_learning_rate <= 0:
        raise InputError(f"--finetune-learning-rate must be positive, got {options.finetune_learning_rate}")
    if options.select not in SELECTIONS:
        raise InputError(f"--select {options.select!r}: expected one of {', '.join(SELECTIONS)}")


def _fresh_minigames(options: AdversarialTrainingOptions, after_plan: Any) -> None:
    """Write the after-stage manifest: mini-games M..2M-1 of the split the before stage uses as 0..M-1."""
    from envs.items import load_items
    from envs.minigames import MiniGames, split_minigames

    path = after_plan.manifest(options.size)
    if path.is_file():
        return
    ids = [item.item_id for item in load_items(options.items)]
    split = split_minigames(ids, options.size, options.split_seed)
    wanted = 2 * options.minigames
    if len(split) < wanted:
        raise InputError(f"{options.items}: the pool of {len(ids)} items holds {len(split)} mini-games of size "
                         f"{options.size}; the experiment needs {wanted} ({options.minigames} before, "
                         f"{options.minigames} fresh after)")
    fresh = split.games[options.minigames:wanted]
    MiniGames(split.size, split.seed, split.fingerprint, fresh).save(path)


def _benchmark(options: AdversarialTrainingOptions, plan: Any, stage: str) -> list[dict]:
    from benchmarks.runner import run_plan

    def show(record: dict) -> None:
        if options.progress:
            state = f"error: {record['error']}" if "error" in record else (
                f"consistency {record['consistency']:.3f} drop {record['drop']:.3f}")
            print(f"{stage}: {record['trial']}: {state} ({record['seconds']:.0f} s)", flush=True)

    records = list(run_plan(plan, workers=options.workers, on_record=show).values())
    failed = [r for r in records if "error" in r]
    if failed:
        # A comparison over the trials that happened to succeed would mislead; a rerun retries the failed ones.
        raise ClevrGameError(f"{stage}: {len(failed)} of {len(records)} trials failed "
                             f"(first: {failed[0]['trial']}: {failed[0]['error']}); rerun to retry them")
    return records


def _export(options: AdversarialTrainingOptions) -> Path:
    from clevr_game.export import MANIFEST_FILE, ExportOptions, export_run

    out = options.folder / "export"
    if not (out / MANIFEST_FILE).is_file():  # the manifest is written last: its presence means complete
        summary = export_run(ExportOptions(run=options.folder / "before", out=out, select=options.select,
                                           items=options.items, seed=options.seed))
        if options.progress:
            print(f"export: {summary.last_line()}", flush=True)
    return out


def _heldout(options: AdversarialTrainingOptions) -> str:
    from clevr_game.dataset import dataset_files
    from clevr_game.generate import generate_dataset

    if options.heldout is not None:
        dataset_files(options.heldout)  # a missing folder fails now, not after the benchmark
        return options.heldout
    folder = options.folder / "heldout"
    try:
        dataset_files(folder)
    except InputError:
        generate_dataset(folder, HELDOUT_SCENES, HELDOUT_QUESTIONS_PER_SCENE, HELDOUT_SEED, progress=False)
    return str(folder)


def _inside_experiment(options: AdversarialTrainingOptions, folder: str) -> bool:
    return Path(folder).resolve().is_relative_to(options.folder.resolve())


def _renderable(options: AdversarialTrainingOptions, folder: str, name: str) -> str:
    """A dataset folder whose images a pixel player's renders may be cached in: `folder` itself when it is in
    EXP, else EXP/pixel-data/NAME holding a copy of its scenes.json and questions.json (renewed when they
    differ). The caches are per scenes.json (`players.pixel.images.image_folder`), so a copy renders anew only
    what the render cache has never drawn."""
    import filecmp
    import shutil

    from clevr_game.atomic import atomic_path
    from clevr_game.dataset import dataset_files

    if _inside_experiment(options, folder):
        return folder
    copy = options.folder / PIXEL_DATA_DIR / name
    copy.mkdir(parents=True, exist_ok=True)
    for original in dataset_files(folder):
        target = copy / original.name
        if not (target.is_file() and filecmp.cmp(original, target, shallow=False)):
            with atomic_path(target) as temporary:
                shutil.copyfile(original, temporary)
    return str(copy)


def _render(options: AdversarialTrainingOptions, source: SourcePlayer, folders: list[str]) -> None:
    """Render the images of `folders` the pixel player trains and is measured on (missing ones only)."""
    from players.pixel.images import ensure_images

    for folder in folders:
        ensure_images(folder, source.image, workers=options.workers, progress=options.progress)


def _training_command(options: AdversarialTrainingOptions, source: SourcePlayer, clean: str, export: Path,
                      heldout: str, warmup: int) -> str:
    """The `clevr-game players train` command line that does the fine-tune (recorded in its player file)."""
    command = ["clevr-game", "players", "train", "--player", source.trainer, "--data", clean,
               "--extra", str(export), "--init", str(source.path), "--out", str(options.finetuned),
               "--eval-data", heldout, "--steps", str(options.finetune_steps),
               "--batch-size", str(options.finetune_batch_size),
               "--learning-rate", f"{options.finetune_learning_rate:g}", "--warmup-steps", str(warmup),
               "--eval-every", str(options.finetune_steps), "--seed", str(options.seed),
               "--threads", str(options.threads), "--log-dir", ""]
    if source.pixel:
        command += ["--preset", source.image.preset, "--image-size", f"{source.image.width}x{source.image.height}",
                    "--render-workers", str(options.workers)]
    return shlex.join(command)


def _finetune(options: AdversarialTrainingOptions, source: SourcePlayer, clean: str, export: Path,
              heldout: str) -> None:
    """Fine-tune a copy of the player on `clean` plus the export, with the trainer of its kind (resumable)."""
    if options.finetuned.is_file() and (
            source.load_file(options.finetuned).info.get("step") == options.finetune_steps):
        return
    # A short warmup: Adam's moments start at zero even when the weights do not.
    warmup = max(1, options.finetune_steps // 10)
    common = dict(
        player=source.trainer, data=clean, extra_data=[str(export)], init=str(source.path),
        out=str(options.finetuned), eval_data=heldout, steps=options.finetune_steps,
        batch_size=options.finetune_batch_size, learning_rate=options.finetune_learning_rate,
        warmup_steps=warmup, seed=options.seed, eval_every=options.finetune_steps, threads=options.threads,
        log_dir="", progress=options.progress, resume=True,
        command=_training_command(options, source, clean, export, heldout, warmup),
    )
    if source.pixel:
        from players.pixel.training import PixelTrainingOptions, train_pixel

        # The other settings (weight decay, clipping, ...) are the pixel trainer's own defaults.
        train_pixel(PixelTrainingOptions(**common, preset=source.image.preset, width=source.image.width,
                                         height=source.image.height, render_workers=options.workers))
    else:
        from players.state.training import TrainingOptions, train

        train(TrainingOptions(**common))


def _clean_accuracy(player_spec: str, folder: str, render_workers: int = 1) -> float:
    """Accuracy on every question of `folder`: on the scenes for a state player, on the images rendered with
    its spec for a pixel player (the `players eval` paths)."""
    from players.pixel.evaluation import evaluate_on_dataset
    from players.registry import load

    with load(player_spec) as player:
        return evaluate_on_dataset(player, folder, render_workers=render_workers).accuracy


def _rows(options: AdversarialTrainingOptions, before: list[dict], after: list[dict],
          heldout: str, clean: str) -> list[dict[str, Any]]:
    """The report's three rows; `clean` is the items' dataset as the player reads it (a pixel player's copy)."""
    from benchmarks.stats import table

    m = options.minigames
    stages = [("before", options.player, before, f"0..{m - 1}"),
              ("after", options.player, after, f"{m}..{2 * m - 1}"),
              ("after", options.finetuned_player, after, f"{m}..{2 * m - 1}")]
    accuracy: dict[str, dict[str, float]] = {}
    rows = []
    for stage, player, records, minigames in stages:
        if player not in accuracy:
            accuracy[player] = {"heldout": _clean_accuracy(player, heldout, options.workers),
                                "items": _clean_accuracy(player, clean, options.workers)}
        trained = next(r for r in table(records) if r["player"] == player and r["adversary"] == "trained")
        rows.append({
            "stage": stage,
            "player": "fine-tuned" if player == options.finetuned_player else "original",
            "spec": player, "minigames": minigames,
            "clean_heldout": accuracy[player]["heldout"], "clean_items": accuracy[player]["items"],
            "clean_minigames": trained["clean_accuracy"],
            "consistency": trained["consistency"], "drop": trained["drop"], "trials": trained["trials"],
        })
    return rows


def _interval(summary: dict) -> str:
    low, high = summary["ci95"]
    return f"{summary['mean']:.3f} [{low:.3f}, {high:.3f}]"


def _markdown(options: AdversarialTrainingOptions, source: SourcePlayer, rows: list[dict], export_questions: int,
              heldout: str) -> str:
    lines = [
        f"# Adversarial training: {options.player}",
        "",
        f"Mini-games of size {options.size} from {options.items} (split seed {options.split_seed}); "
        f"{options.seeds} seed(s) x {options.minigames} mini-game(s) per row; {options.steps} adversary steps per trial.",
        f"Fine-tuned for {options.finetune_steps} steps (learning rate {options.finetune_learning_rate}) on the "
        f"items' clean questions plus {export_questions} exported questions (`--select {options.select}`) "
        f"of the before stage's mini-games.",
        "The after rows are the *fresh* mini-games of the same split: no item of theirs was attacked or exported "
        "(their clean questions are part of the fine-tuning data, like every item's).",
        f"Clean accuracy on the held-out set {heldout}, on every item, and on the rows' mini-games; "
        "consistency and drop of the trained adversary: mean [95% bootstrap CI].",
        *([f"A pixel player ({source.trainer}): every image it sees, in the benchmark, the fine-tune and the "
           f"clean accuracies, is rendered with its spec ({source.image.label}); the benchmark checks that every "
           "object stays visible."] if source.pixel else []),
        "",
        "| stage | player | mini-games | clean held-out | clean items | clean mini-games | consistency | drop | trials |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['stage']} | {row['player']} | {row['minigames']} | {row['clean_heldout']:.3f} | "
            f"{row['clean_items']:.3f} | {row['clean_minigames']:.3f} | {_interval(row['consistency'])} | "
            f"{_interval(row['drop'])} | {row['trials']} |"
        )
    return "\n".join(lines) + "\n"


def run_adversarial_training(options: AdversarialTrainingOptions) -> Path:
    """Run (or resume) the whole experiment; returns the path of EXP/report.md."""
    import torch

    from clevr_game.export import QUESTIONS_FILE
    from clevr_game.scene import read_json

    _check(options)
    torch.set_num_threads(options.threads)
    source = source_player(options.player)
    heldout = _heldout(options)
    before_plan = options.plan("before", [options.player])
    after_plan = options.plan("after", [options.player, options.finetuned_player])
    _fresh_minigames(options, after_plan)  # also refuses a pool too small, before any trial runs
    before = _benchmark(options, before_plan, "before")
    export = _export(options)
    # What the player reads the clean items and the held-out set from: a pixel player's images are rendered
    # beside the datasets, so into copies when the datasets are outside EXP.
    clean, clean_heldout = options.items, heldout
    if source.pixel:
        clean, clean_heldout = _renderable(options, options.items, "items"), _renderable(options, heldout, "heldout")
        _render(options, source, [clean, str(export), clean_heldout])
    _finetune(options, source, clean, export, clean_heldout)
    after = _benchmark(options, after_plan, "after")
    rows = _rows(options, before, after, clean_heldout, clean)
    export_questions = len(read_json(export / QUESTIONS_FILE)["questions"])
    write_json_atomic(options.folder / SUMMARY_FILE, {
        "options": asdict(options), "player_kind": "pixel" if source.pixel else "state",
        "image": source.image.as_dict() if source.pixel else None,
        "export_questions": export_questions, "heldout": heldout,
        "read_from": {"items": clean, "heldout": clean_heldout}, "rows": rows,
    }, indent=1)
    report = options.folder / REPORT_FILE
    write_text_atomic(report, _markdown(options, source, rows, export_questions, heldout))
    return report
