"""CLEVR-POC datasets: environments (`.lp` + English) and `items.json`, seeded and byte-identical on rerun.

Query attributes follow fixed quotas (default 40% colour, 40% shape, 10% size,
10% material); within an attribute no answer set may take much more than its
share, so answers are spread rather than dominated by one frequent set.

Beside `items.json`, every item gets a folder `items/NNNN/` holding what
`poc solve` reads: `partial.json` (the visible scene), `q.lp` (its query rule
under the question and the stored answer as comments) and `env.lp` (a copy of
its environment), so `poc solve --environment env.lp --scene partial.json
--question q.lp` runs inside it as written.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clevr_game.asp import POC_MAX_OBJECTS, POC_MIN_OBJECTS
from clevr_game.asp.envgen import environment_text, generate_environment
from clevr_game.asp.environment import Environment
from clevr_game.asp.questions import make_question, partial_scene
from clevr_game.asp.sampling import SceneSampler
from clevr_game.asp.solve import brave_answers
from clevr_game.errors import ClevrGameError, InputError
from clevr_game.programs import program_to_json
from clevr_game.scene import Scene, write_json_atomic, write_text_atomic
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC

DEFAULT_QUERY_WEIGHTS: dict[str, float] = {"color": 0.4, "shape": 0.4, "size": 0.1, "material": 0.1}
MAX_ANSWER_KINDS = 8  # answer sets per attribute that share its quota evenly
HIDDEN_TRIES_PER_SCENE = 3
RELAX_EVERY = 40  # rejected draws after which an answer set may appear once more
MAX_DRAWS_PER_ITEM = 3000


def attribute_quotas(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Split `total` items by `weights` (largest remainder; ties in ATTRIBUTES order)."""
    unknown = set(weights) - set(ATTRIBUTES)
    if unknown or not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise InputError(f"query weights {weights}: need non-negative weights over {', '.join(ATTRIBUTES)}")
    norm = sum(weights.values())
    exact = {a: total * weights.get(a, 0.0) / norm for a in ATTRIBUTES}
    quotas = {a: math.floor(x) for a, x in exact.items()}
    order = sorted(ATTRIBUTES, key=lambda a: (-(exact[a] - quotas[a]), ATTRIBUTES.index(a)))
    for a in order[: total - sum(quotas.values())]:
        quotas[a] += 1
    return quotas


@dataclass
class _EnvironmentEntry:
    ident: str
    environment: Environment
    sampler: SceneSampler


def item_folder(out: str | os.PathLike[str], item_index: int) -> Path:
    """`out/items/NNNN`: the files of one item."""
    return Path(out) / "items" / f"{item_index:04d}"


def item_question_text(item: dict) -> str:
    """The `q.lp` of an item: its rule, under the question and the stored answer as comments."""
    return f"% {item['question']}\n% stored answer: {', '.join(item['answer'])}\n{item['asp']}\n"


def write_item_files(out: str | os.PathLike[str], item: dict, environment_text: str) -> Path:
    """Write `partial.json`, `q.lp` and `env.lp` of one item into its folder; returns the folder."""
    folder = item_folder(out, int(item["item_index"]))
    write_json_atomic(folder / "partial.json", item["scene"], indent=1)
    write_text_atomic(folder / "q.lp", item_question_text(item))
    write_text_atomic(folder / "env.lp", environment_text)
    return folder


def _write_environments(
    out: Path, count: int, rng: np.random.Generator, samplers_seed: np.random.SeedSequence,
    min_objects: int, max_objects: int, allow_empty_regions: bool,
) -> list[_EnvironmentEntry]:
    folder = out / "environments"
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for k, child in enumerate(samplers_seed.spawn(count)):
        ident = f"env_{k:03d}"
        n = int(rng.integers(min_objects, max_objects + 1))
        specs = generate_environment(rng, n, allow_empty_regions=allow_empty_regions)
        text = environment_text(specs, n, f"CLEVR-POC environment {ident}: {n} objects")
        write_text_atomic(folder / f"{ident}.lp", text)
        write_text_atomic(folder / f"{ident}.txt", "".join(f"{s.sentence()}\n" for s in specs))
        environment = Environment.from_text(text, f"environments/{ident}.lp")
        entries.append(_EnvironmentEntry(ident, environment, SceneSampler(environment, np.random.default_rng(child))))
    return entries


def _item(
    entries: list[_EnvironmentEntry], attribute: str, index: int, rng: np.random.Generator,
    seen: Counter, cap: int, hidden_objects: Callable[[Scene], list[int]] | None = None,
) -> dict:
    domain = len(CLEVR_POC.values(attribute))
    rejected = 0
    for _ in range(MAX_DRAWS_PER_ITEM):
        entry = entries[int(rng.integers(len(entries)))]
        scene = entry.sampler.sample_scene(image_index=index)
        for hidden in rng.permutation(len(scene))[:HIDDEN_TRIES_PER_SCENE].tolist():
            question = make_question(scene, hidden, attribute, rng)
            if question is None:
                continue
            partial = partial_scene(scene, hidden)
            answer = brave_answers(entry.environment, partial, question.rule)
            allowed = cap + rejected // RELAX_EVERY
            if not 1 <= len(answer) < domain or seen[tuple(answer)] >= allowed:
                rejected += 1
                continue
            # Last, as it renders: the scene a pixel player sees must show every object (CLEVR's rule).
            if hidden_objects is not None and hidden_objects(partial):
                continue
            seen[tuple(answer)] += 1
            return {
                "item_index": index,
                "environment": entry.ident,
                "scene": partial.to_json(),
                "hidden_object": {**scene.objects[hidden].to_json(), "index": hidden},
                "query_attribute": attribute,
                "question": question.text,
                "program": program_to_json(question.program),
                "asp": question.rule,
                "answer": answer,
            }
    raise ClevrGameError(f"item {index}: no {attribute} question found in {MAX_DRAWS_PER_ITEM} scenes")


def generate_poc_dataset(
    out_dir: str | os.PathLike[str],
    num_environments: int,
    num_items: int,
    seed: int,
    *,
    min_objects: int = POC_MIN_OBJECTS,
    max_objects: int = POC_MAX_OBJECTS,
    query_weights: dict[str, float] | None = None,
    allow_empty_regions: bool = False,
    item_files: bool = True,
    check_visibility: bool = False,
) -> Path:
    """Write `out_dir/environments/env_XXX.{lp,txt}`, `out_dir/items.json` and (with `item_files`)
    each item's `out_dir/items/NNNN/{partial.json,q.lp,env.lp}`; returns the items path.

    `check_visibility`: every object of each partial scene shows at least CLEVR's 200
    pixels at the index pass's 320 x 240, for items that will be rendered.
    """
    if num_environments < 1 or num_items < 0:
        raise InputError("--environments must be >= 1 and --items >= 0")
    if not POC_MIN_OBJECTS <= min_objects <= max_objects <= POC_MAX_OBJECTS:
        raise InputError(f"--min-objects / --max-objects: need {POC_MIN_OBJECTS} <= min <= max <= {POC_MAX_OBJECTS}")
    weights = dict(query_weights or DEFAULT_QUERY_WEIGHTS)
    quotas = attribute_quotas(num_items, weights)
    out = Path(out_dir)
    environments_seed, samplers_seed, items_seed = np.random.SeedSequence(seed).spawn(3)
    entries = _write_environments(
        out, num_environments, np.random.default_rng(environments_seed), samplers_seed, min_objects, max_objects,
        allow_empty_regions,
    )
    rng = np.random.default_rng(items_seed)
    schedule = [a for a in ATTRIBUTES for _ in range(quotas[a])]
    schedule = [schedule[k] for k in rng.permutation(len(schedule)).tolist()]
    seen = {a: Counter() for a in ATTRIBUTES}
    caps = {
        a: max(1, math.ceil(quotas[a] / min(MAX_ANSWER_KINDS, 2 ** len(CLEVR_POC.values(a)) - 2)))
        for a in ATTRIBUTES
    }
    hidden = None
    if check_visibility:
        from clevr_game.render.silhouettes import hidden_objects_geometric as hidden
    items = [_item(entries, attribute, i, rng, seen[attribute], caps[attribute], hidden)
             for i, attribute in enumerate(schedule)]
    from clevr_game import __version__

    info = {
        "generator": f"clevr-game {__version__}", "vocabulary": CLEVR_POC.name, "seed": seed,
        "query_weights": weights, "num_environments": num_environments, "num_items": num_items,
        "allow_empty_regions": allow_empty_regions, "check_visibility": check_visibility,
    }
    environments = [
        {
            "id": e.ident, "file": f"environments/{e.ident}.lp", "text": f"environments/{e.ident}.txt",
            "num_objects": e.environment.num_objects, "constraints": e.environment.sentences,
        }
        for e in entries
    ]
    if item_files:
        texts = {e.ident: e.environment.text for e in entries}
        for item in items:
            write_item_files(out, item, texts[item["environment"]])
    path = out / "items.json"
    write_json_atomic(path, {"info": info, "environments": environments, "items": items})
    return path
