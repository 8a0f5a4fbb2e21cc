"""Queries per second of every shipped player on CPU with one torch thread: a batch of 256 queries
in one `answer_batch` call against the same queries asked one per call.

State players read the scene; pixel players read `fast` renders at their image size, rendered
before the clock starts (through the render cache, so only the first run renders). Goals: >= 500
queries/s for state players, >= 100 queries/s for pixel players, batched.
Run: python -m perf.players [--quick] [--players NAME,...] [--profile NAME]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from perf.timing import print_table, rate, row
from players.protocol import NEED_IMAGE, Player, Query

BATCH = 256
SCENES = 64  # four questions per scene: pixel players read each image once per batch
STATE_GOAL, PIXEL_GOAL = 500.0, 100.0
PLAYERS = ("state-transformer", "state-rn", "neuro-symbolic", "film", "pixel-rn", "object-transformer")


def benchmark_queries(folder: Path, player: Player) -> list[Query]:
    """BATCH queries on a generated dataset in `folder`, carrying what `player` needs (images rendered first)."""
    from clevr_game.dataset import dataset_files, load_dataset

    _, questions, scene_of = load_dataset(*dataset_files(folder))
    image_of: dict[int, str] = {}
    if NEED_IMAGE in player.needs:
        from players.pixel.images import ensure_images

        scenes, paths = ensure_images(folder, player.image_spec)  # type: ignore[attr-defined]
        image_of = {s.image_index: str(p) for s, p in zip(scenes, paths, strict=True)}
    return [Query(f"{q.image_index}:{q.index}", q.text, scene=scene, image_path=image_of.get(q.image_index),
                  program=q.program).restricted_to(player.needs)
            for q, scene in zip(questions[:BATCH], scene_of[:BATCH], strict=True)]


def player_row(name: str, folder: Path, quick: bool) -> dict:
    from players.registry import load

    player = load(name)
    queries = benchmark_queries(folder, player)
    singles = queries[: 32 if quick else 96]

    def batched() -> int:
        answers = player.answer_batch(queries)
        assert all(a.ok for a in answers), next(a.error for a in answers if not a.ok)
        return len(answers)

    def one_per_call() -> int:
        return sum(len(player.answer_batch([query])) for query in singles)

    repeats = 2 if quick else 3
    batched()  # warm up: lazy imports, compiled programs, allocator
    value = rate(batched, repeats=repeats, min_seconds=0.5)
    baseline = rate(one_per_call, repeats=repeats, min_seconds=0.5)
    goal = PIXEL_GOAL if NEED_IMAGE in player.needs else STATE_GOAL
    verdict = f">= {goal:.0f}/s" + ("" if value >= goal else f" (missed: {value / goal:.0%} of it)")
    player.close()
    return row(f"{name}, {BATCH} at once vs 1 per call", "queries/s", baseline, value, verdict)


def run(quick: bool = False, names: tuple[str, ...] = PLAYERS) -> list[dict]:
    import torch

    from clevr_game.generate import generate_dataset

    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        generate_dataset(folder, SCENES, BATCH // SCENES, seed=0, progress=False)
        for name in names:
            try:
                rows.append(player_row(name, Path(folder), quick))
            except Exception as exc:  # a player whose weights are not shipped must not hide the others
                print(f"{name}: not measured: {type(exc).__name__}: {exc}")
    return rows


def profile(name: str) -> None:
    """Where a batch of BATCH queries spends its time (cProfile, top 25 by cumulative time)."""
    import cProfile
    import pstats

    import torch

    from clevr_game.generate import generate_dataset
    from players.registry import load

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        generate_dataset(folder, SCENES, BATCH // SCENES, seed=0, progress=False)
        player = load(name)
        queries = benchmark_queries(Path(folder), player)
        player.answer_batch(queries)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(5):
            player.answer_batch(queries)
        profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--players", default=",".join(PLAYERS), help="comma-separated player names")
    parser.add_argument("--profile", default=None, metavar="NAME", help="profile one player's batch instead")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return
    import os

    rows = run(args.quick, tuple(n for n in args.players.split(",") if n))
    # On a shared machine the figures fall with the load: say what it was.
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print_table(rows)


if __name__ == "__main__":
    main()
