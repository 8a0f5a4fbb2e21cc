"""How much of a pixel player's accuracy comes from the image, not from the question's prior.

Every question of a dataset is answered twice: with its own scene's image, and
with another scene's image (each question's scene shifted by a seeded random
non-zero offset, so no question keeps its own). A player that reads the scene
loses much of its accuracy on the second pass; one that answers from the
question's wording alone loses nothing. Table 2's drops are read against this:
a player that hardly looks at the image has little for an adversary's move to change.

    python -m experiments.image_reliance --player pixel-rn --data runs/ns19/real-val
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

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


def main(argv: list[str] | None = None) -> int:
    from players.state.checkpoint import shipped_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--player", help="a shipped pixel player: film, pixel-rn, neuro-symbolic, object-transformer")
    chosen.add_argument("--weights", help="a pixel player file")
    parser.add_argument("--data", required=True, help="a CLEVR-format dataset folder (images rendered when missing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    path = args.weights or str(shipped_path(f"{args.player}.pt"))
    result = measure(path, args.data, args.seed)
    print(f"{args.player or path} on {args.data} ({result.questions} questions): own image {result.own_image:.4f}, "
          f"another scene's image {result.other_image:.4f}, from the image {result.from_image:+.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
