"""How much of a player's accuracy comes from the scene it sees, not from the question's prior.

Every question of a dataset is answered twice: about its own scene, and about
another scene (each question's scene shifted by a seeded random non-zero offset,
so no question keeps its own), scored both times against its own answer. An
image player is shown the other scene's image, a state player its scene JSON
(and the oracle its program on it). A player that reads the scene loses much of
its accuracy on the second pass; one that answers from the question's wording
alone loses nothing. Table 2's drops are read against this: a player that hardly
looks at the scene has little for an adversary's move to change.

    python -m experiments.image_reliance --player pixel-rn --data runs/ns19/real-val
    python -m experiments.image_reliance --player state-transformer --data runs/rv-state
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from clevr_game.errors import InputError


@dataclass(frozen=True)
class ImageReliance:
    own_image: float
    other_image: float
    questions: int

    @property
    def from_image(self) -> float:
        return self.own_image - self.other_image


def other_scenes(scene_of: torch.Tensor, scenes: int, seed: int) -> torch.Tensor:
    """Each question's scene moved by a random offset in 1..scenes-1: never its own scene."""
    if scenes < 2:
        raise InputError("the image reliance check needs at least two scenes")
    offsets = torch.randint(1, scenes, scene_of.shape, generator=torch.Generator().manual_seed(seed))
    return (scene_of + offsets) % scenes


def measure(player_path: str, folder: str, seed: int = 0, render_workers: int = 1) -> ImageReliance:
    """Accuracy of the pixel player file at `player_path` on `folder`, with its own and with other images."""
    from players.pixel.checkpoint import load_player_file
    from players.pixel.data import load_pixel_data
    from players.pixel.training import evaluate_pixel_player

    player_file = load_player_file(player_path)
    data, _ = load_pixel_data(folder, player_file.vocabulary(), list(player_file.answers), player_file.image,
                              render_workers=render_workers)
    own, _ = evaluate_pixel_player(player_file, data)
    shifted = dataclasses.replace(data.questions,
                                  scene_of=other_scenes(data.questions.scene_of, len(data.images), seed))
    other, _ = evaluate_pixel_player(player_file, dataclasses.replace(data, questions=shifted))
    return ImageReliance(own.accuracy, other.accuracy, len(data))


def shown_positions(folder: str, seed: int) -> tuple[list[int], list[int]]:
    """Per question of the dataset in `folder`: the position of its own scene and of the scene shown instead."""
    from clevr_game.dataset import dataset_files, load_questions
    from clevr_game.scene import load_scenes

    scenes_path, questions_path = dataset_files(folder)
    scenes = load_scenes(scenes_path)
    position_of = {(s.image_index if s.image_index is not None else i): i for i, s in enumerate(scenes)}
    own = []
    for question in load_questions(questions_path):
        if question.image_index not in position_of:
            raise InputError(f"{questions_path.name}: question {question.index}: "
                             f"image_index {question.image_index} has no scene")
        own.append(position_of[question.image_index])
    return own, other_scenes(torch.tensor(own), len(scenes), seed).tolist()


def measure_player(player: Any, folder: str, seed: int = 0, render_workers: int = 1) -> ImageReliance:
    """Accuracy of any loaded player on `folder`, about each question's own scene and about another's.

    The player is asked through its protocol, so shipped, file, subprocess and HTTP players are measured
    alike: an image player is sent the other scene's image, a state player its scene JSON.
    """
    from players.pixel.evaluation import evaluate_on_dataset

    own, other = shown_positions(folder, seed)
    own_accuracy, other_accuracy = (evaluate_on_dataset(player, folder, render_workers=render_workers,
                                                        shown=shown).accuracy for shown in (own, other))
    return ImageReliance(own_accuracy, other_accuracy, len(own))


OTHER = {"image": "another scene's image", "scene": "another scene"}


def main(argv: list[str] | None = None) -> int:
    from players.protocol import NEED_IMAGE
    from players.registry import add_input_options, input_from_args, load_guarded

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--player", help="any player spec: a shipped name (state-transformer, film, blind, oracle, "
                                         "...), file:PATH, subprocess:COMMAND or http(s)://URL")
    chosen.add_argument("--weights", help="a pixel player file, measured on its tensors directly (faster)")
    parser.add_argument("--data", required=True, help="a CLEVR-format dataset folder (images rendered when missing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--render-workers", type=int, default=1)
    add_input_options(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.weights:
        result, seen = measure(args.weights, args.data, args.seed, args.render_workers), "image"
    else:
        # Answers about another scene may fail (a unique object it lacks): scored wrong, never a reason to stop.
        with load_guarded(args.player, player_input=input_from_args(args), max_failures=None) as player:
            result = measure_player(player, args.data, args.seed, args.render_workers)
            seen = "image" if NEED_IMAGE in player.needs else "scene"
    print(f"{args.player or args.weights} on {args.data} ({result.questions} questions): "
          f"own {seen} {result.own_image:.4f}, {OTHER[seen]} {result.other_image:.4f}, "
          f"from the {seen} {result.from_image:+.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
