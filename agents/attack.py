"""`clevr-game attack`: train one adversary on one mini-game against one player, then evaluate it.

The run folder holds everything: the mini-game manifest, the training checkpoint
(a killed run resumes from it), TensorBoard logs, the learning curves as a PNG,
and `result.json` with the scores of the trained adversary and of the random
adversary on the same items with the same number of samples.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from clevr_game.atomic import atomic_path, open_atomic, write_json_atomic
from clevr_game.errors import InputError, RunFailed
from clevr_game.run_files import (
    CHECKPOINT_FILE,
    MANIPULATIONS_FILE,
    MINIGAMES_FILE,
    RESULT_FILE,
    RUN_OPTIONS_FILE,
)
from clevr_game.scene import read_json
from players.guard import (
    DEFAULT_FAILURE_WINDOW,
    DEFAULT_MAX_ERROR_RATE,
    DEFAULT_MAX_FAILURES,
    FailureCount,
    PlayerGaveUp,
)

RESUME_OPTIONS = ("player", "items", "minigame_size", "minigame", "split_seed", "rewards", "fine_tune",
                  "adversary_weights", "mode", "adversary", "needs", "image_size", "render_preset", "send_image")
"""What a resumed run must share with the run that began the folder, besides the trainer's config."""
ADVERSARY_INPUTS = ("state", "pixel")


@dataclass
class AttackOptions:
    player: str
    items: str
    minigame_size: int = 10
    minigame: int = 0
    seed: int = 0
    steps: int = 20_000
    out: str = "runs/attack"
    split_seed: int = 0
    minigames_file: str | None = None
    num_envs: int = 128
    eval_samples: int = 32
    learning_rate: float = 5e-4
    entropy_coef: float = 0.05
    stay_bias: float = 4.4
    target_entropy: float | None = 0.3
    target_entropy_final: float | None = None
    # Measured (results/adversary-stability): without a bound the evaluated policy's invalid share
    # ended at 0.5-0.8; a bound at the starting coefficient plus the best window keeps it near 0.05.
    max_entropy_coef: float | None = 0.05
    keep_best: bool = True
    check_visibility: bool | None = None  # None: on for players that see images (CLEVR's 200-pixel rule)
    rewards: tuple[float, float, float, float] = (1.0, 0.1, -0.1, -0.8)  # dr, cr, fr, isr
    fine_tune: bool = False
    adversary_weights: str | None = None
    adversary: str = "state"  # what the adversary sees: the scene graph, or the original image ("pixel")
    mode: str = "displacement"
    progress: bool = True
    # Only the `attack` command's --steps is the user's own figure; a benchmark's preset steps
    # would warn about themselves in every trial.
    report_rounding: bool = False  # say on stderr when --steps is not whole batches of num_envs
    threads: int = 1  # the batches are small: one thread beats two, and trials run side by side
    player_timeout: float | None = None  # seconds per answer of an external player (None: its default)
    player_startup_timeout: float | None = None  # seconds for its first answer (None: its default)
    max_player_failures: int | None = DEFAULT_MAX_FAILURES
    failure_window: int = DEFAULT_FAILURE_WINDOW
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    random_valid: bool = True  # also measure the random valid adversary (displacement moves only)
    # What an external player is sent (players.registry.INPUT_OPTIONS); None: not given, its default.
    needs: str | None = None  # comma-separated of scene, image, program
    image_size: str | None = None  # WIDTHxHEIGHT
    render_preset: str | None = None
    send_image: str | None = None  # path or inline (http players)

    def player_input(self) -> dict[str, str]:
        """The input options given, as `players.registry.load_guarded` takes them."""
        from players.registry import INPUT_OPTIONS

        return {name: getattr(self, name) for name in INPUT_OPTIONS if getattr(self, name) is not None}


class PlayerFailedRun(RunFailed):
    """The player failed too often for the run's scores to mean anything; carries the count."""

    def __init__(self, message: str, count: FailureCount, result_path: Path | None = None):
        super().__init__(message)
        self.count = count
        self.result_path = result_path


def _learning_curve_png(history: Any, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 5), sharex=True)
    top.plot(history.steps, history.reward, lw=1)
    top.set_ylabel("mean reward")
    bottom.plot(history.steps, history.invalid, lw=1, label="invalid share")
    bottom.plot(history.steps, history.changed, lw=1, label="changed share")
    bottom.set_xlabel("env steps")
    bottom.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def run_attack(options: AttackOptions) -> dict:
    """Train, evaluate, write RUN/result.json; returns the result dict.

    One attack writes a run folder at a time: a second one into the same folder is
    refused in one line (their checkpoints and results would overwrite each other).
    """
    from clevr_game.folder_lock import sole_writer

    if Path(options.out).exists() and not Path(options.out).is_dir():
        raise InputError(f"--out {options.out}: a file, not a folder")
    with sole_writer(options.out, "attack"):
        return _run_attack(options)


def _run_attack(options: AttackOptions) -> dict:
    import torch
    from tqdm import tqdm

    from agents.a2c import A2CConfig, A2CTrainer, policy_actions
    from agents.evaluation import evaluate, random_actions, random_valid_actions, scores
    from envs.game import Rewards
    from envs.items import ItemPool, load_items
    from envs.minigames import MiniGames, split_minigames
    from envs.vector import AdversarialVectorEnv
    from players.registry import load_guarded

    if options.adversary not in ADVERSARY_INPUTS:
        raise InputError(f"--adversary {options.adversary!r}: expected one of {', '.join(ADVERSARY_INPUTS)}")
    if options.adversary == "pixel" and options.fine_tune:
        raise InputError("--fine-tune trains the state adversary's relation network; the pixel adversary's stays frozen")
    if options.threads < 1:
        raise InputError(f"--threads {options.threads}: must be at least 1")
    torch.set_num_threads(options.threads)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    items = load_items(options.items)
    ids = [it.item_id for it in items]
    manifest_path = out / MINIGAMES_FILE
    source = options.minigames_file or (manifest_path if manifest_path.is_file() else None)
    if source is not None:
        games = MiniGames.load(source)
        if games.size != options.minigame_size:
            raise InputError(f"{source}: mini-games of size {games.size}, asked for {options.minigame_size}")
    else:
        games = split_minigames(ids, options.minigame_size, options.split_seed)
    games.save(manifest_path)
    chosen = games.indices(ids, options.minigame)
    pool = ItemPool([items[i] for i in chosen])

    config = A2CConfig(steps=whole_batches(options.steps, options.num_envs), num_envs=options.num_envs,
                       learning_rate=options.learning_rate,
                       entropy_coef=options.entropy_coef, stay_bias=options.stay_bias,
                       target_entropy=options.target_entropy,
                       target_entropy_final=options.target_entropy_final,
                       max_entropy_coef=options.max_entropy_coef, keep_best=options.keep_best,
                       seed=options.seed)
    config = _resumable_config(out, config, options)
    if options.report_rounding:
        _report_rounding(options.steps, config)
    rewards = Rewards(*options.rewards)
    with load_guarded(options.player, timeout_s=options.player_timeout,
                      startup_timeout_s=options.player_startup_timeout, max_failures=options.max_player_failures,
                      window=options.failure_window, player_input=options.player_input()) as player:
        earlier = FailureCount()  # the queries of the parts of this run before its last resume
        try:
            env = AdversarialVectorEnv(pool, player, options.num_envs, mode=options.mode, rewards=rewards,
                                       check_visibility=options.check_visibility)
            env, left_out = _without_unanswered_items(env, options, rewards)
            pool = env.pool
            features = _adversary_features(options, pool)
            writer = _tensorboard(out / "tb")
            log = (lambda step, metrics: [writer.add_scalar(f"train/{k}", v, step) for k, v in metrics.items()]) \
                if writer else None
            trainer = A2CTrainer(env, features, config, checkpoint=out / CHECKPOINT_FILE, log=log,
                                 extra_state=lambda: {"player_count": asdict(combined(earlier, player.count))})
            earlier = FailureCount(**trainer.restored_extra.get("player_count", {}))
            done = trainer.update * config.num_envs
            with tqdm(total=trainer.total_updates * config.num_envs, initial=done, desc="attack", unit="step",
                      disable=not options.progress, leave=False) as bar:
                history = trainer.train(progress=bar.update)
            evaluated_update = trainer.use_best()
            if writer:
                writer.close()
            game = env.game
            everyone = list(range(len(pool)))
            trained = evaluate(game, everyone, policy_actions(trainer.adversary, features),
                               options.eval_samples, seed=options.seed + 1)
            random = evaluate(game, everyone, random_actions(options.seed + 2), options.eval_samples,
                              seed=options.seed + 1)
            random_valid = random_valid_items = None
            if options.random_valid and options.mode == "displacement":
                random_valid_items = evaluate(game, everyone, random_valid_actions(game, options.seed + 3),
                                              options.eval_samples, seed=options.seed + 1)
                random_valid = scores(random_valid_items)
        except PlayerGaveUp as exc:
            raise PlayerFailedRun(str(exc), combined(earlier, player.count)) from None
        count = combined(earlier, player.count)
    trained_scores, random_scores = scores(trained), scores(random)
    _learning_curve_png(history, out / "learning_curve.png")
    result = {
        "options": {k: v for k, v in asdict(options).items() if k not in ("progress", "report_rounding", "threads")},
        **trained_scores.to_json(),
        "random_consistency": random_scores.consistency,
        "random_drop": random_scores.drop,
        **({"random_jaccard_loss": random_scores.jaccard_loss} if random_scores.jaccard_loss is not None else {}),
        "random_invalid": random_scores.invalid,
        # The random valid adversary: one or two objects moved, redrawn until every referee accepts.
        "random_valid_consistency": random_valid.consistency if random_valid else None,
        "random_valid_drop": random_valid.drop if random_valid else None,
        "random_valid_invalid": random_valid.invalid if random_valid else None,
        # Each evaluation's own failed answers: an item with one is unscored, never read as unchanged.
        "random_eval_queries": random_scores.queries, "random_eval_player_errors": random_scores.player_errors,
        "random_unscored_items": random_scores.unscored_items,
        **({"random_valid_eval_queries": random_valid.queries,
            "random_valid_eval_player_errors": random_valid.player_errors,
            "random_valid_unscored_items": random_valid.unscored_items} if random_valid else {}),
        "eval_samples": options.eval_samples,
        "items": [r.to_json() for r in trained],
        "random_items": [{"item_id": r.item_id, "changed": r.changed, "dropped": r.dropped} for r in random],
        # Per scored item, the share of random valid moves that broke its right answer (per-family baselines).
        "random_valid_items": [{"item_id": r.item_id, "dropped_share": r.dropped_share}
                               for r in random_valid_items or [] if r.scored],
        "history": asdict(history),
        "evaluated_update": evaluated_update,
        "visibility_checked": bool(env.game.check_visibility),
        **count.to_json(),
        "items_left_out": len(left_out),
        "left_out_items": left_out,
    }
    failures = [count.failure(options.max_error_rate),
                trained_scores.failure(options.max_error_rate, "the trained adversary's evaluation"),
                random_scores.failure(options.max_error_rate, "the random adversary's evaluation"),
                random_valid.failure(options.max_error_rate, "the random valid adversary's evaluation")
                if random_valid else None]
    failure = next((f for f in failures if f is not None), None)
    if failure is not None:
        result["failed"] = failure
    _write_manipulations(trained, out / MANIPULATIONS_FILE)
    write_json_atomic(out / RESULT_FILE, result)
    if failure is not None:
        raise PlayerFailedRun(failure, count, out / RESULT_FILE)
    return result


def _adversary_features(options: AttackOptions, pool: Any) -> Any:
    """What the adversary sees of each item, computed once: its scene graph, or its original image."""
    if options.adversary == "pixel":
        from agents.pixel_features import (
            PixelFeatureCache,
            load_pixel_adversary_network,
            render_originals,
        )

        network, word_map, spec = load_pixel_adversary_network(options.adversary_weights, pool.words)
        return PixelFeatureCache(network, word_map, pool, render_originals(pool, spec))
    from agents.features import FeatureCache, LiveFeatures
    from agents.pretrained import load_adversary_network

    network, word_map = load_adversary_network(options.adversary_weights, pool.words)
    return (LiveFeatures if options.fine_tune else FeatureCache)(network, word_map, pool)


def _without_unanswered_items(env: Any, options: AttackOptions, rewards: Any) -> tuple[Any, list[dict]]:
    """The env on the items whose unmoved scene the player answered (after the game's retries).

    An item whose original answer failed has no answer to change: it is left out of
    the run and listed, not counted as unchanged.
    """
    from envs.items import ItemPool
    from envs.vector import AdversarialVectorEnv

    old = env.game.old_answers(list(range(len(env.pool))))
    if all(not a.ok for a in old):  # nothing to attack: fail this run, not the caller's others
        raise PlayerFailedRun(f"player {options.player!r} answered none of the {len(old)} items: {old[0].error}",
                              env.game.player.count)
    left_out = [{"item_id": item.item_id, "error": answer.error}
                for item, answer in zip(env.pool.items, old, strict=True) if not answer.ok]
    if not left_out:
        return env, []
    kept = ItemPool([item for item, answer in zip(env.pool.items, old, strict=True) if answer.ok])
    narrowed = AdversarialVectorEnv(kept, env.game.player, options.num_envs, mode=options.mode, rewards=rewards,
                                    check_visibility=options.check_visibility)
    narrowed.game.adopt_old_answers(env.game)
    return narrowed, left_out


def whole_batches(steps: int, num_envs: int) -> int:
    """`steps` rounded up to whole batches: an update steps each of the `num_envs` envs once."""
    if steps < 1 or num_envs < 1:
        raise InputError(f"--steps {steps}, --num-envs {num_envs}: both must be at least 1")
    return -(-steps // num_envs) * num_envs


def _report_rounding(requested: int, config: Any) -> None:
    # On stderr, so the last line of stdout stays `consistency: X drop: Y`.
    trained = max(1, config.steps // config.num_envs) * config.num_envs  # A2CTrainer.total_updates batches
    if trained != requested:
        direction = "up" if trained > requested else "down"
        print(f"attack: --steps {requested} rounded {direction} to {trained} "
              f"(whole batches of {config.num_envs} envs x 1 step)", file=sys.stderr)


def _flag(name: str) -> str:
    if name == "player_weights":
        return "the player's weights (sha256 prefix)"
    return "--lr" if name == "learning_rate" else "--" + name.replace("_", "-")


def _run_options(options: AttackOptions) -> dict[str, Any]:
    from players.registry import weights_digest

    chosen = {name: getattr(options, name) for name in RESUME_OPTIONS}
    chosen["items"] = str(Path(options.items).resolve())
    if options.adversary_weights is not None:
        chosen["adversary_weights"] = str(Path(options.adversary_weights).resolve())
    chosen["rewards"] = list(options.rewards)
    # A retrained player is another opponent: its run must not resume an adversary trained against the old one.
    chosen["player_weights"] = weights_digest(options.player)
    return chosen


def _resumable_config(out: Path, config: Any, options: AttackOptions) -> Any:
    """The trainer's config; InputError when OUT holds a checkpoint written with other options.

    A fresh run records its options in OUT/options.json, so a resume that changes the
    player, items or mini-game is refused too, not only one that changes the trainer.
    """
    import torch

    checkpoint, recorded_path = out / CHECKPOINT_FILE, out / RUN_OPTIONS_FILE
    if not checkpoint.is_file():
        write_json_atomic(recorded_path, _run_options(options), indent=2)
        return config
    advice = "resume with the same options or choose another folder with --out"
    try:
        saved = torch.load(checkpoint, weights_only=False, map_location="cpu")["config"]
    except Exception as exc:  # any unreadable pickle: the folder is not this run's to resume
        raise InputError(f"{checkpoint}: not a readable attack checkpoint ({type(exc).__name__}); {advice}") from None
    if saved.get("steps") == options.steps:  # begun before steps were rounded up: keep its count
        config = replace(config, steps=options.steps)
    differences = [f"{_flag(name)} was {saved.get(name)!r}, now {value!r}"
                   for name, value in asdict(config).items() if saved.get(name) != value]
    if recorded_path.is_file():
        recorded = read_json(recorded_path)
        recorded = recorded if isinstance(recorded, dict) else {}
        differences += [f"{_flag(name)} was {recorded.get(name)!r}, now {value!r}"
                        # An option a folder predates was at the value it has now.
                        for name, value in _run_options(options).items() if recorded.get(name, value) != value]
    if differences:
        raise InputError(f"{out}: its {CHECKPOINT_FILE} was written with other options "
                         f"({'; '.join(differences)}); {advice}")
    return config


def _write_manipulations(results: list, path: Path) -> None:
    """Every valid move of the evaluation, for `clevr-game export --select all`."""
    import json

    from clevr_game.export import manipulation_record

    with open_atomic(path) as handle:
        for result in results:
            for o in result.valid_moves:
                record = manipulation_record(o.item_id, o.moves, o.old_answer, o.new_answer, o.true_answer,
                                             o.changed, o.dropped, o.new_scene)
                handle.write(json.dumps(record) + "\n")


def _tensorboard(folder: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is a declared dependency; tolerate a trimmed install
        return None
    return SummaryWriter(str(folder))


def combined(earlier: FailureCount, now: FailureCount) -> FailureCount:
    """The query count of a run's earlier parts (before a resume) and of this part together."""
    return FailureCount(earlier.queries + now.queries, earlier.errors + now.errors,
                        earlier.first_error or now.first_error)


def last_line(result: dict) -> str:
    """`consistency: C drop: D [unscored: U eval-errors: E/Q] accuracy: A`.

    The unscored items and the evaluation's failed queries appear only when there are
    some; the clean accuracy always closes the line, so a player that ignores the scene
    (never changes, never right) cannot pass for a robust one.
    """
    line = f"consistency: {result['consistency']:.4f} drop: {result['drop']:.4f}"
    if result.get("unscored_items") or result.get("eval_player_errors"):
        line += (f" unscored: {result.get('unscored_items', 0)}"
                 f" eval-errors: {result.get('eval_player_errors', 0)}/{result.get('eval_queries', 0)}")
    return line + f" accuracy: {result['clean_accuracy']:.4f}"

