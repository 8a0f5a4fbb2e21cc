"""The images a pixel player sees: one render preset and size, dataset images rendered on demand.

The preset and size are part of a pixel player's identity (a model trained on
`fast` renders is attacked with `fast` renders), so they travel in its player
file as an `ImageSpec`. A dataset's images for a spec live in
`<dataset>/cache/images/<preset>-<W>x<H>-<scenes hash>/`; the hash of
scenes.json keeps images of a regenerated dataset apart from the old ones.
Missing images are rendered there (through the renderer's content cache, so a
scene drawn before is copied, not rendered), and `stack.npy` holds all of them
as one (S, H, W, 3) uint8 array in the order of scenes.json.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from clevr_game.dataset import dataset_files
from clevr_game.errors import InputError
from clevr_game.scene import Scene, load_scenes, new_file_mode
from players.protocol import (
    ImageSpec as ImageSpec,  # its home is the protocol; pixel code imports it here
)

STACK_FILE = "stack.npy"


def parse_image_size(text: str) -> tuple[int, int]:
    """`128x96` -> (128, 96); InputError otherwise."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise InputError(f"image size {text!r}: expected WIDTHxHEIGHT such as 128x96")
    return int(parts[0]), int(parts[1])


def _file_hash(path: Path) -> str:
    digest = hashlib.sha1()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def image_folder(data: str | os.PathLike[str], spec: ImageSpec) -> Path:
    """Where the images of the dataset in `data` rendered with `spec` live."""
    scenes_path, _ = dataset_files(data)
    return Path(data) / "cache" / "images" / f"{spec.label}-{_file_hash(scenes_path)}"


def ensure_images(
    data: str | os.PathLike[str],
    spec: ImageSpec,
    *,
    workers: int = 2,
    progress: bool = False,
    only: Collection[int] | None = None,
) -> tuple[list[Scene], list[Path]]:
    """The dataset's scenes and one image path per scene, rendering the missing images first.

    `only`: positions in scenes.json whose images are needed (default: all); the
    other scenes keep their path but are not rendered.
    """
    from clevr_game.render.naming import image_names

    scenes_path, _ = dataset_files(data)
    scenes = load_scenes(scenes_path)
    if not scenes:
        raise InputError(f"{scenes_path}: no scenes")
    folder = image_folder(data, spec)
    paths = [folder / name for name in image_names(scenes)]
    needed = range(len(paths)) if only is None else sorted(set(only))
    missing = [i for i in needed if not paths[i].is_file()]
    if missing:
        from clevr_game.render import Renderer

        if progress:
            print(f"rendering {len(missing)} of {len(paths)} images ({spec.label}) into {folder}", flush=True)
        with Renderer(spec.checked().preset, workers=workers, width=spec.width, height=spec.height) as renderer:
            renderer.render_many([scenes[i] for i in missing], folder, names=[paths[i].name for i in missing],
                                 progress=progress)
    return scenes, paths


def load_image(path: str | os.PathLike[str], spec: ImageSpec) -> np.ndarray:
    """(H, W, 3) uint8 pixels at the spec's size (resized when the file has another size)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image = image.convert("RGB")
            if image.size != (spec.width, spec.height):
                image = image.resize((spec.width, spec.height), Image.Resampling.BILINEAR)
            return np.asarray(image, dtype=np.uint8).copy()
    except FileNotFoundError:
        raise InputError(f"{path}: no such image") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise InputError(f"{path}: cannot read image: {exc}") from None


def _save_npy_atomic(path: Path, array: np.ndarray) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            np.save(stream, array)
        os.chmod(temporary, new_file_mode())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def image_stack(paths: Sequence[Path], spec: ImageSpec) -> np.ndarray:
    """(S, H, W, 3) uint8 images of `paths`, kept as stack.npy beside them for the next run."""
    folder = paths[0].parent
    stack_path = folder / STACK_FILE
    if stack_path.is_file():
        stack = np.load(stack_path, mmap_mode="r")
        if stack.shape == (len(paths), spec.height, spec.width, 3):
            return np.array(stack)  # a writable copy in memory
    stack = np.stack([load_image(path, spec) for path in paths])
    if all(path.parent == folder for path in paths):
        _save_npy_atomic(stack_path, stack)
    return stack


def dataset_images(
    data: str | os.PathLike[str], spec: ImageSpec, *, workers: int = 2, progress: bool = False
) -> tuple[list[Scene], np.ndarray]:
    """Scenes of the dataset and their images (S, H, W, 3) uint8, rendered when missing."""
    scenes, paths = ensure_images(data, spec, workers=workers, progress=progress)
    return scenes, image_stack(paths, spec)
