"""Benchmark presets: `quick` (minutes on a 2-core machine), `paper`, and the Table 2 experiment.

`table2` is the paper's experiment at the power its questions need: 10 / 5 / 3
mini-games of sizes 10 / 100 / 1000, two seeds each, on a generated pool of one
question per scene (so mini-games share neither items nor scenes), every referee
(CLEVR's visibility rule included) for every player, the blind player as the floor,
and the robustness card's per-trial budget (benchmarks.card.protocol, `standard`):
500 adversary training steps per item at every size, so that size is not confounded
with training budget, 16 evaluation samples and a greedy search of 50 queries per
item. Each trial carries every baseline: random and random valid moves, greedy search
(once per mini-game) and the blind accuracy (each question asked about another item's
scene). `table2-full` is the same design at the paper's 30 seeds, for a Ray cluster.

How long `table2` takes (`estimated_hours`): sizes 10 and 100 are the standard
cards' measured trial times (results/leaderboard/*/trials.jsonl, the same budget per
trial), averaged over the players of a kind and their adversaries. Size 1000: for an
image player film's one measured trial (pixel adversary, every baseline: 2,482 s),
for a state player ten times size 100 (state-transformer's measured trial: 376 s).
With the object-transformer that is about 44 hours of trial time, about 22 hours on
two cores, three quarters of it the size-1000 trials of the image players: a run of
several `--max-minutes` pieces, each resuming at the first missing trial.

`table2-pilot` is the design `results/table2/` was made with (3 / 2 / 1 mini-games,
2,000 / 500 / 50 steps per item, two questions per scene, visibility for image
players only); it stays so that those trials can be rebuilt and resumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.trials import Plan, SizeBudget


@dataclass(frozen=True)
class TrialTime:
    """The measured mean seconds of one trial of a player kind (state | pixel) at one size and step count."""

    kind: str
    size: int
    steps: int
    seconds: float


@dataclass(frozen=True)
class Preset:
    players: tuple[str, ...]
    sizes: tuple[int, ...]
    minigames: int
    seeds: int
    steps: int
    eval_samples: int
    search_budget: int
    pool_scenes: int
    pool_questions_per_scene: int
    adversaries: tuple[str, ...] = ("state",)
    per_size: tuple[SizeBudget, ...] = ()
    """Mini-games, seeds and steps of some sizes, overriding `minigames`, `seeds` and `steps`."""
    optional_players: tuple[str, ...] = ()
    """Players included only when `players.registry.available()` has them."""
    clevr_templates: bool = False
    """The default pool asks CLEVR 1.0's templates (shipped, or `--clevr-templates DIR`) and the project's own."""
    check_visibility: bool | None = None
    """Every referee for every player, CLEVR's visibility rule included (True); None: visibility for image
    players only, as the committed Table 2 pilot's trials were made."""
    trial_times: tuple[TrialTime, ...] = ()
    """What `estimated_hours` scales: measured mean trial times of this design."""

    def budget(self, size: int) -> SizeBudget:
        return next((b for b in self.per_size if b.size == size),
                    SizeBudget(size, self.minigames, self.seeds, self.steps))

    def all_players(self) -> tuple[str, ...]:
        """`players`, then the optional players that are registered now."""
        from players.registry import available

        registered = set(available())
        return self.players + tuple(p for p in self.optional_players if p in registered)


SHIPPED_PLAYERS = ("state-transformer", "state-rn")
QUICK_PLAYERS = (*SHIPPED_PLAYERS, "neuro-symbolic")
"""The quick preset's players: the state players and one the adversary breaks at size 10 (neuro-symbolic: its
perception misreads moved objects; results/table2 measured drops of 0.10 to 0.19 in half its size-10 trials)."""
STATE_PLAYERS = ("state-transformer", "state-rn")
OBJECT_TRANSFORMER = "object-transformer"
PIXEL_PLAYERS = ("neuro-symbolic", "film", "pixel-rn", OBJECT_TRANSFORMER)
BLIND = "blind"
TABLE2_PLAYERS = ("state-transformer", "state-rn", "neuro-symbolic", "film", "pixel-rn", BLIND)
TABLE2_PILOT_PLAYERS = ("state-transformer", "state-rn", "neuro-symbolic", "film", "pixel-rn")

STEPS_PER_ITEM = 500
"""The robustness card's `standard` budget per item (clevr-robust-v1), at every size of table2."""
TABLE2_EVAL_SAMPLES = 16
TABLE2_SEARCH_BUDGET = 50


def _equal_per_item(minigames: dict[int, int], seeds: int) -> tuple[SizeBudget, ...]:
    return tuple(SizeBudget(size, count, seeds, STEPS_PER_ITEM * size, eval_samples=TABLE2_EVAL_SAMPLES,
                            search_budget=TABLE2_SEARCH_BUDGET) for size, count in minigames.items())


TABLE2_MINIGAMES = {10: 10, 100: 5, 1000: 3}
TABLE2_BUDGETS = _equal_per_item(TABLE2_MINIGAMES, seeds=2)
TABLE2_FULL_BUDGETS = _equal_per_item(TABLE2_MINIGAMES, seeds=30)
TABLE2_POOL_SCENES = 3_600
"""One question per scene: 10 x 10 + 5 x 100 + 3 x 1000 items, every mini-game on scenes of its own."""

TABLE2_TRIAL_TIMES = (
    # Sizes 10 and 100: the standard cards (results/leaderboard, 2 cores with another job beside), state-transformer
    # and state-rn; neuro-symbolic and object-transformer, both adversaries. Size 1000, state: ten times size 100
    # (state-transformer's one measured trial, every baseline included, took 376 s); pixel: film's one measured
    # trial, pixel adversary and every baseline (2,482 s: training 25.5 min, evaluation 6, search 10).
    TrialTime("state", 10, 5_000, 3.6), TrialTime("state", 100, 50_000, 57.7),
    TrialTime("state", 1000, 500_000, 577.0),
    TrialTime("pixel", 10, 5_000, 15.8), TrialTime("pixel", 100, 50_000, 159.2),
    TrialTime("pixel", 1000, 500_000, 2482.0),
)
TABLE2_PILOT_BUDGETS = (SizeBudget(10, 3, 2, 20_000, search_budget=20),
                        SizeBudget(100, 2, 2, 50_000, eval_samples=16, search_budget=20),
                        SizeBudget(1000, 1, 1, 50_000, eval_samples=8, search_budget=10))
TABLE2_PILOT_TRIAL_TIMES = (
    # The pilot's own run (results/table2/trials.jsonl), one trial at a time with another job on the second core.
    TrialTime("state", 10, 20_000, 5), TrialTime("state", 100, 50_000, 10), TrialTime("state", 1000, 50_000, 36),
    TrialTime("pixel", 10, 20_000, 33), TrialTime("pixel", 100, 50_000, 133), TrialTime("pixel", 1000, 50_000, 301),
)
WORKERS = 2

PRESETS: dict[str, Preset] = {
    "quick": Preset(QUICK_PLAYERS, (10,), 2, 3, 20_000, 32, 100, 200, 2, check_visibility=True),
    "paper": Preset(SHIPPED_PLAYERS, (10, 100, 1000), 3, 30, 100_000, 64, 500, 5_000, 2),
    "table2": Preset(TABLE2_PLAYERS, (10, 100, 1000), 10, 2, STEPS_PER_ITEM * 10, TABLE2_EVAL_SAMPLES,
                     TABLE2_SEARCH_BUDGET, TABLE2_POOL_SCENES, 1, adversaries=("state", "pixel"),
                     per_size=TABLE2_BUDGETS, optional_players=(OBJECT_TRANSFORMER,), clevr_templates=True,
                     check_visibility=True, trial_times=TABLE2_TRIAL_TIMES),
    "table2-full": Preset(TABLE2_PLAYERS, (10, 100, 1000), 10, 30, STEPS_PER_ITEM * 10, TABLE2_EVAL_SAMPLES,
                          TABLE2_SEARCH_BUDGET, TABLE2_POOL_SCENES, 1, adversaries=("state", "pixel"),
                          per_size=TABLE2_FULL_BUDGETS, optional_players=(OBJECT_TRANSFORMER,),
                          clevr_templates=True, check_visibility=True, trial_times=TABLE2_TRIAL_TIMES),
    "table2-pilot": Preset(TABLE2_PILOT_PLAYERS, (10, 100, 1000), 3, 2, 50_000, 32, 20, 700, 2,
                           adversaries=("state", "pixel"), per_size=TABLE2_PILOT_BUDGETS,
                           optional_players=(OBJECT_TRANSFORMER,), clevr_templates=True,
                           trial_times=TABLE2_PILOT_TRIAL_TIMES),
}
POOL_SEED = 0


def pool_items(preset: Preset) -> int:
    return preset.pool_scenes * preset.pool_questions_per_scene


def items_needed(preset: Preset) -> int:
    """Items the preset's mini-games take from the pool: they share none."""
    return sum(size * preset.budget(size).minigames for size in preset.sizes)


def estimated_hours(preset: Preset, players: tuple[str, ...] | None = None, workers: int = WORKERS) -> float:
    """Wall-clock hours of the preset on `workers` cores: its measured `trial_times`, scaled by its steps."""
    measured = {(t.kind, t.size): t for t in preset.trial_times}
    seconds = 0.0
    for player in preset.all_players() if players is None else players:
        kind = "pixel" if player in PIXEL_PLAYERS else "state"
        for size in preset.sizes:
            budget, time = preset.budget(size), measured[(kind, size)]
            trials = budget.minigames * budget.seeds * len(preset.adversaries)
            seconds += trials * time.seconds * budget.steps / time.steps
    return seconds / workers / 3600


POOL_COMMAND_FILE = "pool_command.txt"
"""Beside the generated pool: the `clevr-game generate` command that makes the same pool."""


def default_pool(preset: Preset, folder: Path, *, clevr_templates: str | None, progress: bool) -> str:
    """The preset's generated item pool in `folder` (made once; a resumed run reuses it); returns its path.

    Visibility is checked as CLEVR does: the pool's scenes may be rendered for
    pixel players. A preset that asks CLEVR's templates uses them with the
    project's own (`--templates both`): the copy shipped in the package, or the
    folder `clevr_templates` names.
    """
    from clevr_game.atomic import write_text_atomic
    from clevr_game.dataset import dataset_files
    from clevr_game.errors import InputError
    from clevr_game.generate import generate_dataset

    try:
        dataset_files(folder)
        return str(folder)
    except InputError:
        pass
    templates = "both" if preset.clevr_templates else None
    generate_dataset(folder, preset.pool_scenes, preset.pool_questions_per_scene, POOL_SEED, templates=templates,
                     clevr_templates=clevr_templates if templates else None, progress=progress,
                     check_visibility=True)
    command = (f"clevr-game generate --num-scenes {preset.pool_scenes} --questions-per-scene "
               f"{preset.pool_questions_per_scene} --seed {POOL_SEED} --check-visibility"
               + (" --templates both" if templates else "")
               + (f" --clevr-templates {clevr_templates}" if templates and clevr_templates else "")
               + f" --out {folder}")
    write_text_atomic(folder.parent / POOL_COMMAND_FILE, command + "\n")
    return str(folder)


def budgets(preset: Preset, sizes: list[int], *, minigames: int | None, seeds: int | None,
            steps: int | None) -> tuple[SizeBudget, ...]:
    """Each size's budget from the preset, with the options the user gave replacing its figures everywhere."""
    chosen = []
    for size in sizes:
        budget = preset.budget(size)
        chosen.append(SizeBudget(size, budget.minigames if minigames is None else minigames,
                                 budget.seeds if seeds is None else seeds, budget.steps if steps is None else steps,
                                 budget.eval_samples, budget.search_budget))
    return tuple(chosen)


def preset_plan(
    preset: Preset,
    out: Path,
    *,
    players: list[str] | None = None,
    items: str | None = None,
    sizes: list[int] | None = None,
    minigames: int | None = None,
    seeds: int | None = None,
    steps: int | None = None,
    adversaries: tuple[str, ...] | None = None,
    clevr_templates: str | None = None,
    progress: bool = True,
    **plan_options: Any,
) -> Plan:
    """The benchmark's plan: the preset's figures wherever the user gave none.

    Every player spec is checked before anything runs, so a typo fails now, not
    as one failed trial per seed hours later. Without `items`, the preset's
    generated pool in OUT/items (see `default_pool`). `plan_options` go to
    `Plan` as they are (time limits, visibility, adversary weights).
    """
    from players.registry import check_spec

    players = list(preset.all_players()) if players is None else players
    for spec in players:
        check_spec(spec)
    if items is None:
        items = default_pool(preset, out / "items", clevr_templates=clevr_templates, progress=progress)
    sizes = list(preset.sizes) if sizes is None else sizes
    return Plan(
        players=players,
        items=items,
        sizes=sizes,
        minigames=preset.minigames if minigames is None else minigames,
        seeds=preset.seeds if seeds is None else seeds,
        steps=preset.steps if steps is None else steps,
        out=str(out),
        eval_samples=preset.eval_samples,
        search_budget=preset.search_budget,
        adversaries=preset.adversaries if adversaries is None else adversaries,
        per_size=budgets(preset, sizes, minigames=minigames, seeds=seeds, steps=steps),
        **plan_options,
    )
