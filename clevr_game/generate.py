"""Random valid scenes under CLEVR's rules, and CLEVR-format datasets of scenes and questions.

Every random choice is drawn from one numpy Generator seeded by the caller, so
the same seed gives byte-identical files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from clevr_game.errors import InputError
from clevr_game.layout import sample_layout
from clevr_game.scene import (
    DEFAULT_DIRECTIONS,
    MAX_OBJECTS,
    Scene,
    SceneObject,
    load_scenes,
    project_to_pixels,
    relation_matrices,
    relationships_from_matrices,
    save_scenes,
    write_json_atomic,
)
from clevr_game.vocab import ATTRIBUTES, CLEVR, Vocabulary

MIN_OBJECTS = 3


def image_filename(split: str, index: int) -> str:
    return f"CLEVR_{split}_{index:06d}.png"


def generate_scene(
    rng: np.random.Generator,
    num_objects: int,
    *,
    vocabulary: Vocabulary = CLEVR,
    image_index: int = 0,
    split: str = "new",
    directions: dict | None = None,
) -> Scene:
    """One scene of `num_objects` objects with uniformly drawn attributes and a valid layout."""
    directions = dict(directions or DEFAULT_DIRECTIONS)
    while True:
        picks = [rng.integers(0, len(vocabulary.values(a)), num_objects) for a in ATTRIBUTES]
        attrs = [
            {a: vocabulary.values(a)[int(picks[k][i])] for k, a in enumerate(ATTRIBUTES)}
            for i in range(num_objects)
        ]
        radii = np.array([vocabulary.radius(o["size"]) for o in attrs])
        xy = sample_layout(radii, rng, directions)
        if xy is not None:
            break
    rotations = rng.uniform(0.0, 360.0, num_objects)
    coords = np.column_stack([xy, radii])
    pixels = project_to_pixels(coords)
    objects = [
        SceneObject(
            coords=(float(c[0]), float(c[1]), float(c[2])),
            rotation=float(rot),
            pixel_coords=(int(px[0]), int(px[1]), float(px[2])),
            **attrs[i],
        )
        for i, (c, rot, px) in enumerate(zip(coords, rotations, pixels, strict=True))
    ]
    scene = Scene(
        objects=objects,
        directions=directions,
        vocabulary=vocabulary,
        image_index=image_index,
        image_filename=image_filename(split, image_index),
        split=split,
    )
    scene.relationships = relationships_from_matrices(relation_matrices(coords, directions))
    return scene


def generate_scenes(
    num_scenes: int,
    seed: int,
    *,
    min_objects: int = MIN_OBJECTS,
    max_objects: int = MAX_OBJECTS,
    vocabulary: Vocabulary = CLEVR,
    split: str = "new",
    hidden_objects: Callable[[Scene], list[int]] | None = None,
) -> Iterator[Scene]:
    """Random valid scenes; with `hidden_objects` (a renderer's), a scene hiding an object is drawn again,
    as CLEVR's generator does."""
    if not 1 <= min_objects <= max_objects:
        raise InputError(f"--min-objects {min_objects} / --max-objects {max_objects}: need 1 <= min <= max")
    rng = np.random.default_rng(seed)
    for index in range(num_scenes):
        n = int(rng.integers(min_objects, max_objects + 1))
        scene = generate_scene(rng, n, vocabulary=vocabulary, image_index=index, split=split)
        while hidden_objects is not None and hidden_objects(scene):
            scene = generate_scene(rng, n, vocabulary=vocabulary, image_index=index, split=split)
        yield scene


def dataset_info(split: str, seed: int) -> dict:
    # No date: the same seed must give byte-identical files.
    from clevr_game import __version__

    return {"split": split, "version": "1.0", "generator": f"clevr-game {__version__}", "seed": seed,
            "license": "Creative Commons Attribution (CC BY 4.0)"}


def generate_dataset(
    out_dir: str | os.PathLike[str],
    num_scenes: int,
    questions_per_scene: int,
    seed: int,
    *,
    min_objects: int = MIN_OBJECTS,
    max_objects: int = MAX_OBJECTS,
    templates: str | os.PathLike[str] | None = None,
    split: str = "new",
    progress: bool = True,
    clevr_templates: str | os.PathLike[str] | None = None,
    check_visibility: bool = False,
    scenes_file: str | os.PathLike[str] | None = None,
    sampling: str | None = None,
) -> tuple[Path, Path]:
    """Write `out_dir/scenes.json` and `out_dir/questions.json` in CLEVR's format.

    `templates`: `own`, `clevr`, `both` (CLEVR's read from `clevr_templates`) or a
    template file or folder. `check_visibility`: every object shows at least CLEVR's
    200 pixels at the index pass's 320 x 240 (counted by exact ray casting, as the game's
    visibility referee does), for pools that will be rendered.
    `scenes_file`: ask the questions about these scenes (a CLEVR scenes file, e.g. the
    real val scenes) instead of generating `num_scenes`; they are written unchanged.
    `sampling`: how questions are drawn (`QuestionGenerator`): `clevr`, CLEVR's own
    generator's distribution, or `minimal`, descriptions with only the attributes needed;
    by default `clevr` for `templates` `clevr` and `both`, `minimal` for the project's own
    templates and for templates given by path.
    """
    from tqdm import tqdm

    from clevr_game.questions import QuestionGenerator, choose_templates, default_sampling

    if num_scenes < 0 or questions_per_scene < 0:
        raise InputError("--num-scenes and --questions-per-scene must be >= 0")
    out = Path(out_dir)
    choice = None if templates is None else str(templates)
    chosen = choose_templates(choice, clevr_templates)
    if sampling is None:
        sampling = default_sampling(choice)
    # Separate streams, so changing the question count leaves the scenes as they were.
    scene_seed, question_seed = np.random.SeedSequence(seed).spawn(2)
    generator = QuestionGenerator(chosen, seed=int(question_seed.generate_state(1)[0]), sampling=sampling)
    scenes: list[Scene] = []
    questions: list[dict] = []
    hidden = None
    if check_visibility:
        # Ray casting, as the game's visibility referee counts: no Blender render per scene.
        from clevr_game.render.silhouettes import hidden_objects_geometric as hidden
    if scenes_file is not None:
        given = load_scenes(scenes_file)
        stream, num_scenes = iter(given), len(given)
    else:
        stream = generate_scenes(
            num_scenes, int(scene_seed.generate_state(1)[0]),
            min_objects=min_objects, max_objects=max_objects, split=split, hidden_objects=hidden,
        )
    for scene in tqdm(stream, total=num_scenes, desc="scenes", unit="scene", disable=not progress, leave=False):
        scenes.append(scene)
        for question in generator.generate(scene, questions_per_scene):
            question["question_index"] = len(questions)
            questions.append(question)
    info = dataset_info(split, seed)
    scenes_path, questions_path = out / "scenes.json", out / "questions.json"
    save_scenes(scenes_path, scenes, info)
    write_json_atomic(questions_path, {"info": info, "questions": questions})
    return scenes_path, questions_path
