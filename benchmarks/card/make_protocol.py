"""Make the frozen protocol's folder: its items, its mini-games and protocol.json.

    python -m benchmarks.card.make_protocol --out clevr_game/data/protocols/clevr-robust-v1

The same command writes the same bytes every time. Made once and shipped: a change to
the items, the mini-games or the budgets is a new protocol with a new name, never a new
version of these files (`benchmarks.card.protocol` refuses a file whose sha256 differs).

1. Questions: CLEVR's 90 templates at CLEVR's own distribution over the shipped real
   CLEVR val scenes, exactly as
   `clevr-game generate --templates clevr --sampling clevr --scenes SCENES --questions-per-scene 10 --seed 0`
   draws them; every answer is computed again by the independent reference executor.
2. Scenes: those breaking CLEVR's placement rules, or with an object showing fewer
   than CLEVR's 200 pixels at 320 x 240 (the game's visibility referee), are skipped:
   a scene the referees refuse before any move could not be played fairly.
3. Deal: a seeded permutation of the scenes (the skipped ones left out), dealt first to
   the size-10 mini-games (10 scenes, 1 question each), then to the size-100 ones
   (50 scenes, 2 questions each, of two families where the scene has them), so no two
   mini-games share an item or a scene.
4. Only the dealt scenes (unchanged, in CLEVR's file order) and their questions
   (renumbered in scene order) are written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game import __version__
from clevr_game.atomic import write_text_atomic
from clevr_game.datafiles import CLEVR_VAL_SCENES
from clevr_game.errors import ClevrGameError, InputError
from clevr_game.layout import judge_scenes
from clevr_game.programs import parse_program, reference_execute
from clevr_game.render.renderer import CLEVR_INDEX_SIZE, CLEVR_MIN_PIXELS
from clevr_game.render.silhouettes import visible_pixels_geometric
from clevr_game.scene import load_scenes
from envs.minigames import MiniGames, pool_fingerprint

NAME = "clevr-robust-v1"
MADE_BY = f"python -m benchmarks.card.make_protocol --out clevr_game/data/protocols/{NAME}"
DESCRIPTION = ("CLEVR v1.0 val scenes with questions from CLEVR's 90 templates at CLEVR's distribution, "
               "dealt into 10 mini-games of size 10 and 5 of size 100 that share no item or scene")

SCENES_SOURCE = "clevr_game/data/clevr_real/CLEVR_val_scenes_500.json"
TEMPLATES, SAMPLING, QUESTIONS_PER_SCENE, SEED = "clevr", "clevr", 10, 0
GENERATE_COMMAND = (f"clevr-game generate --templates {TEMPLATES} --sampling {SAMPLING} --scenes {SCENES_SOURCE} "
                    f"--questions-per-scene {QUESTIONS_PER_SCENE} --seed {SEED}")

DEAL: tuple[tuple[int, int, int], ...] = ((10, 10, 1), (100, 5, 2))
"""(mini-game size, mini-games, questions per scene), dealt in this order: size 10 first."""

BUDGETS: dict[str, dict[str, Any]] = {
    # Does a player plug in at all? Two mini-games, a few hundred steps: about a minute, figures too thin to judge by.
    "smoke": {"sizes": [{"size": 10, "minigames": 2, "seeds": 1}],
              "steps_per_item": 26, "eval_samples": 4, "search_budget": 5, "pixel_adversary": False},
    "quick": {"sizes": [{"size": 10, "minigames": 4, "seeds": 1}, {"size": 100, "minigames": 2, "seeds": 1}],
              "steps_per_item": 500, "eval_samples": 16, "search_budget": 20, "pixel_adversary": False},
    "standard": {"sizes": [{"size": 10, "minigames": 10, "seeds": 2}, {"size": 100, "minigames": 5, "seeds": 2}],
                 "steps_per_item": 500, "eval_samples": 16, "search_budget": 50, "pixel_adversary": True},
}

README = """# The frozen protocol `{name}`

The items and mini-games every robustness card is measured on (`clevr-game evaluate`,
docs/robustness-card.md). The files never change: `benchmarks.card.protocol` checks
each against the sha256 in `protocol.json` when it loads them, and a new protocol is a
new name.

| file | what |
|---|---|
| `scenes.json` | {scenes} CLEVR v1.0 val scenes, unchanged, in CLEVR's file order and format |
| `questions.json` | {items} questions about them in CLEVR's format, renumbered in scene order (item id `image_index:question_index`) |
| `minigames/size_10.json` | 10 mini-games of 10 items: 10 scenes, one question each |
| `minigames/size_100.json` | 5 mini-games of 100 items: 50 scenes, two questions each |
| `protocol.json` | name, the command that made the folder, how the items were drawn and dealt, the budgets, the sha256 of every other file |

No two mini-games share an item or a scene.

## How it was made

```bash
{made_by}
```

The same command writes the same bytes. It

1. draws the questions as this command does (CLEVR's 90 templates at CLEVR's own
   distribution, 10 questions about each of the first 500 val scenes):

   ```bash
   {generate}
   ```

   and computes every answer again with the independent reference executor
   (`clevr_game.programs.reference_execute`), which must agree;
2. skips the scenes the game's referees refuse before any move: a broken placement
   rule, or an object showing fewer than CLEVR's 200 pixels at 320 x 240 (counted by
   ray casting, as the visibility referee counts). {skipped} of the 500 scenes have such
   an object; `protocol.json` lists them with their counts (`deal.skipped_scenes`);
3. deals a seeded permutation of the remaining scenes (`numpy.random.default_rng(0)`),
   first to the size-10 mini-games, then to the size-100 ones; the same random stream
   then picks each scene's questions: one for a size-10 scene, two of different families
   (CLEVR template files) for a size-100 scene where it has them;
4. writes only the dealt scenes and their questions.

The budgets (`smoke`, `quick`, `standard`) play the first mini-games of each size, in the
manifests' order.

## Licence

The scenes are unchanged excerpts of the CLEVR v1.0 dataset by Justin Johnson, Bharath
Hariharan, Laurens van der Maaten, Li Fei-Fei, C. Lawrence Zitnick and Ross Girshick
("CLEVR: A Diagnostic Dataset for Compositional Language and Elementary Visual
Reasoning", CVPR 2017), redistributed under the Creative Commons Attribution 4.0
International licence (CC BY 4.0, https://creativecommons.org/licenses/by/4.0/). No
change was made to the scene records. The questions were drawn by this project's
generator from CLEVR 1.0's question templates about those scenes.
"""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def generated_questions() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The questions (and info) of the documented `clevr-game generate` command, through its own code."""
    from clevr_game.generate import generate_dataset

    with tempfile.TemporaryDirectory(prefix="clevr-protocol-") as tmp:
        _, questions_path = generate_dataset(
            tmp, 0, QUESTIONS_PER_SCENE, SEED, templates=TEMPLATES, sampling=SAMPLING,
            scenes_file=CLEVR_VAL_SCENES, progress=False,
        )
        data = json.loads(questions_path.read_text(encoding="utf-8"))
    return data["questions"], data["info"]


def refused_scenes(scenes_path: Path) -> dict[int, str]:
    """image_index -> why the game's referees refuse the scene as it stands."""
    scenes = load_scenes(scenes_path)
    refused = {}
    for scene, verdict in zip(scenes, judge_scenes(scenes), strict=True):
        if verdict is not None:
            refused[scene.image_index] = f"placement: {verdict.reason()}"
            continue
        counts = visible_pixels_geometric(scene, *CLEVR_INDEX_SIZE)
        hidden = [i for i, count in enumerate(counts) if count < CLEVR_MIN_PIXELS]
        if hidden:
            refused[scene.image_index] = "visibility: " + ", ".join(
                f"object {i} shows {counts[i]} pixels" for i in hidden)
    return refused


def check_answers(questions: list[dict[str, Any]], scenes: dict[int, dict[str, Any]]) -> None:
    """Raise unless the reference executor gives every stored answer again."""
    for question in questions:
        program = parse_program(question["program"], f"question {question['question_index']}, ")
        again = reference_execute(program, scenes[question["image_index"]])
        if again != question["answer"]:
            raise RuntimeError(f"question {question['question_index']} (scene {question['image_index']}): "
                               f"stored answer {question['answer']!r}, reference executor {again!r}")


def _pick(rng: np.random.Generator, questions: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """`count` questions of one scene, each of a family not picked yet while the scene has one."""
    chosen: list[dict[str, Any]] = []
    for _ in range(count):
        left = [q for q in questions if q not in chosen]
        families = {q["template_filename"] for q in chosen}
        pool = [q for q in left if q["template_filename"] not in families] or left
        chosen.append(pool[int(rng.integers(len(pool)))])
    return chosen


def deal(scene_order: list[int], by_scene: dict[int, list[dict[str, Any]]],
         rng: np.random.Generator) -> list[tuple[int, list[list[dict[str, Any]]]]]:
    """(size, its mini-games as lists of questions), dealing `scene_order` size by size as DEAL says."""
    needed = sum(size * games // per_scene for size, games, per_scene in DEAL)
    if len(scene_order) < needed:
        raise InputError(f"{len(scene_order)} playable scenes, the deal needs {needed}")
    scenes = iter(scene_order)
    dealt = []
    for size, games, per_scene in DEAL:
        minigames = []
        for _ in range(games):
            game: list[dict[str, Any]] = []
            for _ in range(size // per_scene):
                game += _pick(rng, by_scene[next(scenes)], per_scene)
            minigames.append(game)
        dealt.append((size, minigames))
    return dealt


def make_protocol(out: str | Path) -> Path:
    """Write the protocol folder into `out`; returns the path of its protocol.json."""
    out = Path(out)
    source = json.loads(CLEVR_VAL_SCENES.read_text(encoding="utf-8"))
    raw_scenes = {scene["image_index"]: scene for scene in source["scenes"]}
    questions, info = generated_questions()
    by_scene: dict[int, list[dict[str, Any]]] = {}
    for question in questions:
        by_scene.setdefault(question["image_index"], []).append(question)

    refused = refused_scenes(CLEVR_VAL_SCENES)
    rng = np.random.default_rng(SEED)
    permutation = [source["scenes"][i]["image_index"] for i in rng.permutation(len(source["scenes"]))]
    dealt = deal([i for i in permutation if i not in refused], by_scene, rng)

    # Renumber in scene order, as CLEVR's own files run; a question keeps every generated field.
    kept = sorted((q for _, games in dealt for game in games for q in game),
                  key=lambda q: (q["image_index"], q["question_index"]))
    check_answers(kept, raw_scenes)
    item_id = {}
    renumbered = []
    for index, question in enumerate(kept):
        item_id[id(question)] = f"{question['image_index']}:{index}"
        renumbered.append({**question, "question_index": index})
    used = {q["image_index"] for q in kept}
    scenes_out = [scene for scene in source["scenes"] if scene["image_index"] in used]

    files = {
        "scenes.json": json.dumps({"info": source["info"], "scenes": scenes_out}),
        "questions.json": json.dumps({"info": {**info, "split": "val", "protocol": NAME}, "questions": renumbered}),
        "README.md": README.format(name=NAME, scenes=len(scenes_out), items=len(kept), made_by=MADE_BY,
                                   generate=GENERATE_COMMAND, skipped=len(refused)),
    }
    for name, text in files.items():
        write_text_atomic(out / name, text)
    pool = pool_fingerprint([item_id[id(q)] for q in kept])
    for size, games in dealt:
        MiniGames(size, SEED, pool, [[item_id[id(q)] for q in game] for game in games]).save(
            out / "minigames" / f"size_{size}.json")

    hashed = sorted([*files, *(f"minigames/size_{size}.json" for size, _ in dealt)])
    protocol = {
        "name": NAME,
        "description": DESCRIPTION,
        "made_by": MADE_BY,
        "generator": {"command": GENERATE_COMMAND, "templates": TEMPLATES, "sampling": SAMPLING, "seed": SEED,
                      "questions_per_scene": QUESTIONS_PER_SCENE, "scenes": SCENES_SOURCE,
                      "scenes_sha256": sha256_of(CLEVR_VAL_SCENES), "clevr_game_version": __version__},
        "deal": {"seed": SEED, "order": "size 10 first, then size 100",
                 "minigames": [{"size": size, "minigames": games, "questions_per_scene": per_scene}
                               for size, games, per_scene in DEAL],
                 "skipped_scenes": {str(index): why for index, why in sorted(refused.items())}},
        "items": len(kept), "scenes": len(scenes_out),
        "budgets": BUDGETS,
        "sha256": {name: sha256_of(out / name) for name in hashed},
    }
    path = out / "protocol.json"
    write_text_atomic(path, json.dumps(protocol, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help=f"the folder to write (shipped: clevr_game/data/protocols/{NAME})")
    args = parser.parse_args(argv)
    try:
        path = make_protocol(args.out)
    except ClevrGameError as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
