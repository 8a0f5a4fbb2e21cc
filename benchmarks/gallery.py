"""The report's gallery: distinct items whose right answer the adversary broke, before and after the move.

Only right-to-wrong manipulations whose moved scene keeps every CLEVR rule are shown:
inside the board, apart, no ambiguous relation, and every object visible (CLEVR's 200
pixels at 320 x 240, counted as the game's visibility referee counts them), whether or
not the trial's referee checked visibility (`breaks_a_clevr_rule`). Each entry is one
item (no item twice, whichever player or seed broke it),
every player that broke one shown at least once (in the report),
players with the highest drop first, a right answer broken before a merely
changed one, fewer moved objects first. Both scenes are rendered with the
game's renderer; the moved objects are outlined and their moves drawn as
arrows, found by projecting their old and new 3d coordinates with CLEVR's
camera. When Blender cannot start, schematic top views stand in and the
report says so.
"""

from __future__ import annotations

import shutil
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clevr_game.atomic import atomic_path
from clevr_game.scene import CAMERA_MATRIX_WORLD, Scene, project_to_pixels
from clevr_game.vocab import COLOR_RGB

GALLERY_SIZE = 6
SCHEMATIC = "schematic"
"""The gallery preset that draws top views instead of rendering (no Blender)."""
IMAGE_SIZE = (480, 320)
"""CLEVR's own image size: the camera and pixel coordinates are CLEVR's."""
OUTLINE = "#ffd400"
_MARKERS = {"cube": "s", "sphere": "o", "cylinder": "h", "cone": "^"}


@dataclass(frozen=True)
class Candidate:
    """One manipulation that changed an item's answer, with what the gallery needs to show it."""

    player: str
    player_rank: int
    trial: str
    item_id: str
    items_dir: str
    question: str
    true_answer: str
    old_answer: str
    new_answer: str
    dropped: bool
    moves: tuple[tuple[int, float, float], ...]
    before: Scene
    after: Scene

    @property
    def order(self) -> tuple:
        return (not self.dropped, self.player_rank, len(self.moves), self.item_id, self.trial)

    def caption(self, image: str) -> dict:
        moved = [f"{self.before.objects[obj].describe()} ({obj})" for obj, _, _ in self.moves]
        return {"image": image, "player": self.player, "trial": self.trial, "item_id": self.item_id,
                "question": self.question, "true": self.true_answer, "old": self.old_answer,
                "new": self.new_answer, "dropped": self.dropped, "moved": moved}


def breaks_a_clevr_rule(scene: Scene) -> str | None:
    """The first of CLEVR's rules `scene` breaks (placement, then visibility), one line; None when it keeps all."""
    from clevr_game.layout import judge_scenes
    from clevr_game.render.silhouettes import hidden_objects_geometric

    (violation,) = judge_scenes([scene])
    if violation is not None:
        return violation.reason([o.describe() for o in scene.objects])
    hidden = hidden_objects_geometric(scene)
    if hidden:
        return f"object {hidden[0]} ({scene.objects[hidden[0]].describe()}) shows fewer than CLEVR's 200 pixels"
    return None


def pick(candidates: list[Candidate], size: int = GALLERY_SIZE, *, one_per_player: bool = False) -> list[Candidate]:
    """Up to `size` candidates, each of another item, best first (see the module docstring).

    `one_per_player`: first the best candidate of every player that has one (so
    the gallery may hold more than `size`), then the best of the rest up to `size`.
    """
    ordered = sorted(candidates, key=lambda c: c.order)
    chosen: list[Candidate] = []
    seen: set[tuple[str, str]] = set()

    def take(candidate: Candidate) -> bool:
        key = (candidate.items_dir, candidate.item_id)
        if key in seen:
            return False
        seen.add(key)
        chosen.append(candidate)
        return True

    if one_per_player:
        shown: set[str] = set()
        for candidate in ordered:
            if candidate.player not in shown and take(candidate):
                shown.add(candidate.player)
    for candidate in ordered:
        if len(chosen) >= size:
            break
        take(candidate)
    return sorted(chosen, key=lambda c: c.order)


def draw_gallery(chosen: list[Candidate], folder: Path, preset: str, *,
                 stem: str = "gallery") -> tuple[list[dict], str | None]:
    """Write STEM_K.png per entry; returns their captions and a note when rendering fell back.

    `stem`: the file names' prefix; earlier STEM_*.png in `folder` are removed first,
    so a shorter gallery leaves no picture of the last one behind.
    """
    for stale in folder.glob(f"{stem}_*.png"):
        stale.unlink()
    if not chosen:
        return [], None
    images, note = None, None
    if preset != SCHEMATIC:
        try:
            images = _render(chosen, preset)
        except Exception as exc:  # no Blender, a crashed worker, a missing GPU: the report still gets pictures
            note = (f"Blender could not render the gallery ({' '.join(str(exc).split())[:300]}); "
                    "it shows schematic top views instead.")
    captions = []
    for k, candidate in enumerate(chosen):
        name = f"{stem}_{k}.png"
        if images is not None:
            _rendered_figure(candidate, *images[k], folder / name)
        else:
            _schematic_figure(candidate, folder / name)
        captions.append(candidate.caption(name))
    return captions, note


# ------------------------------------------------------------------ rendered pictures


def _render(chosen: list[Candidate], preset: str) -> list[tuple[np.ndarray, np.ndarray]]:
    from clevr_game.render import Renderer, read_png

    scratch = Path(tempfile.mkdtemp(prefix="clevr-gallery-"))
    try:
        scenes = [scene for c in chosen for scene in (c.before, c.after)]
        names = [f"{k}.png" for k in range(len(scenes))]
        with Renderer(preset, width=IMAGE_SIZE[0], height=IMAGE_SIZE[1]) as renderer:
            paths = renderer.render_many(scenes, scratch, names=names)
        pixels = [read_png(p) for p in paths]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [(pixels[2 * k], pixels[2 * k + 1]) for k in range(len(chosen))]


def _pixels(scene: Scene, obj: int, width: int, height: int) -> tuple[float, float, float]:
    """Pixel centre and apparent radius of one object in a width x height image."""
    centre = np.asarray(scene.objects[obj].coords, dtype=np.float64)
    radius = scene.vocabulary.radius(scene.objects[obj].size)
    # A point one radius to the camera's right lies one apparent radius away in the image.
    rim = centre + radius * CAMERA_MATRIX_WORLD[:3, 0]
    (x, y, _), (rx, ry, _) = project_to_pixels(np.stack([centre, rim]), width, height)
    return float(x), float(y), float(np.hypot(rx - x, ry - y))


def _outline(ax, x: float, y: float, radius: float, dashed: bool = False) -> None:
    from matplotlib import patheffects
    from matplotlib.patches import Circle

    circle = Circle((x, y), radius * 1.3 + 3, fill=False, color=OUTLINE, lw=2, ls="--" if dashed else "-")
    circle.set_path_effects([patheffects.withStroke(linewidth=4, foreground="black")])
    ax.add_patch(circle)


def _rendered_figure(candidate: Candidate, before: np.ndarray, after: np.ndarray, path: Path) -> None:
    from matplotlib import patheffects

    plt = _plt()
    height, width = before.shape[:2]
    fig, (left, right) = plt.subplots(1, 2, figsize=(2 * width / 100, height / 100 + 1.1), layout="constrained")
    left.imshow(before)
    right.imshow(after)
    stroke = [patheffects.withStroke(linewidth=3, foreground="black")]
    for obj, _, _ in candidate.moves:
        x0, y0, r0 = _pixels(candidate.before, obj, width, height)
        x1, y1, r1 = _pixels(candidate.after, obj, width, height)
        _outline(left, x0, y0, r0)
        left.text(x0 + r0 + 6, y0 - r0, str(obj), color=OUTLINE, fontsize=10, weight="bold", path_effects=stroke)
        _outline(right, x0, y0, r0, dashed=True)
        _outline(right, x1, y1, r1)
        # Centre to centre: a one-bin move is shorter than the object is wide, so the arrow crosses it.
        right.plot([x0], [y0], "o", color=OUTLINE, ms=5, mec="black")
        right.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops={
            "arrowstyle": "-|>,head_length=0.6,head_width=0.35", "color": OUTLINE, "lw": 2.5,
            "shrinkA": 0, "shrinkB": 0, "path_effects": stroke})
    for ax in (left, right):
        ax.set_axis_off()
    _titles(fig, left, right, candidate, "moved objects outlined; dashed: where they were")
    _save(fig, path)


def _titles(fig, left, right, candidate: Candidate, legend: str) -> None:
    def verdict(answer: str) -> str:
        return "right" if answer == candidate.true_answer else "wrong"

    left.set_title(f"before: answers {candidate.old_answer} ({verdict(candidate.old_answer)})", fontsize=10)
    right.set_title(f"after: answers {candidate.new_answer} ({verdict(candidate.new_answer)})", fontsize=10)
    header = textwrap.fill(f"{candidate.question}  (true answer: {candidate.true_answer})", 95)
    who = textwrap.fill(f"{candidate.player}, item {candidate.item_id}; {legend}", 110)
    fig.suptitle(f"{header}\n{who}", fontsize=9)


# ------------------------------------------------------------------ schematic fallback


def _schematic_figure(candidate: Candidate, path: Path) -> None:
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 5.0), layout="constrained")
    _top_view(left, candidate.before)
    _top_view(right, candidate.after)
    for obj, _, _ in candidate.moves:
        x0, y0 = candidate.before.objects[obj].coords[:2]
        x1, y1 = candidate.after.objects[obj].coords[:2]
        right.annotate("", xy=(x1, y1), xytext=(x0, y0),
                       arrowprops={"arrowstyle": "-|>", "color": "red", "lw": 1.5})
        right.scatter([x0], [y0], s=300, facecolors="none", edgecolors="red", linestyles="--")
    _titles(fig, left, right, candidate, "schematic top view; red arrows: the moves")
    _save(fig, path)


def _top_view(ax, scene: Scene) -> None:
    for obj in scene.objects:
        x, y = obj.coords[:2]
        rgb = np.array(COLOR_RGB[obj.color]) / 255
        size = 260 if obj.size == "large" else (170 if obj.size == "medium" else 90)
        ax.scatter([x], [y], s=size, c=[rgb], marker=_MARKERS.get(obj.shape, "o"),
                   edgecolors="black" if obj.material == "metal" else "none", linewidths=1.5)
    ax.set_xlim(-3.5, 3.5)
    ax.set_ylim(-3.5, 3.5)
    ax.set_aspect("equal")
    ax.set_xlabel("x (from above)", fontsize=8)
    ax.set_ylabel("y", fontsize=8)
    ax.tick_params(labelsize=7)


# ------------------------------------------------------------------ figures


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path, dpi: int = 100) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi)
    _plt().close(fig)
