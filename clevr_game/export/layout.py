"""The exported dataset in CLEVR's layout: scenes, questions and the manifest linking them to the runs.

Scenes get new image indices 0..N-1 and CLEVR file names (`CLEVR_<split>_000000.png`);
several questions about one original image whose manipulations landed on the same
scene share that scene, as questions share images in CLEVR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clevr_game import __version__
from clevr_game.export.items import SourceItem
from clevr_game.export.records import Manipulation
from clevr_game.export.selection import SceneKey, scene_key
from clevr_game.generate import image_filename
from clevr_game.scene import Scene

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class ExportEntry:
    """One selected, verified manipulation and where it came from."""

    record: Manipulation
    source: SourceItem
    scene: Scene
    run: Path
    player: str

    def scene_key(self) -> SceneKey:
        return scene_key(self.source.question.image_index, self.scene)

    def question_key(self) -> tuple[SceneKey, int]:
        return (self.scene_key(), self.source.question.index)


@dataclass
class ExportedDataset:
    scenes: list[Scene] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)
    manifest: list[dict[str, Any]] = field(default_factory=list)

    @property
    def image_names(self) -> list[str]:
        return [s.image_filename or "" for s in self.scenes]


def info(split: str) -> dict[str, Any]:
    """CLEVR's `info` block; no date, so the same runs give byte-identical files."""
    return {"split": split, "version": "1.0", "generator": f"clevr-game {__version__} export"}


def _question_json(entry: ExportEntry, index: int, scene: Scene, split: str) -> dict[str, Any]:
    # The original question as it was written (program, family, template), re-pointed at the new scene.
    question = dict(entry.source.question.raw)
    question.update({
        "question_index": index,
        "image_index": scene.image_index,
        "image_filename": scene.image_filename,
        "split": split,
        "answer": entry.source.question.answer,
    })
    return question


def _manifest_entry(entry: ExportEntry, index: int, scene: Scene) -> dict[str, Any]:
    record, original = entry.record, entry.source
    return {
        "image_index": scene.image_index,
        "image_filename": scene.image_filename,
        "question_index": index,
        "item_id": record.item_id,
        "original_image_index": original.question.image_index,
        "original_image_filename": original.scene.image_filename,
        "original_question_index": original.question.index,
        "moves": [list(move) for move in record.moves],
        "player": entry.player,
        "old_answer": record.old_answer,
        "new_answer": record.new_answer,
        "true_answer": record.true_answer,
        "changed": record.changed,
        "dropped": record.dropped,
        "run": str(entry.run),
    }


def assemble(entries: list[ExportEntry], split: str) -> ExportedDataset:
    """Number the scenes and questions of `entries` (already deduplicated) in order."""
    dataset = ExportedDataset()
    scene_of: dict[SceneKey, Scene] = {}
    for entry in entries:
        key = entry.scene_key()
        scene = scene_of.get(key)
        if scene is None:
            scene = entry.scene
            scene.image_index = len(dataset.scenes)
            scene.image_filename = image_filename(split, scene.image_index)
            scene.split = split
            scene_of[key] = scene
            dataset.scenes.append(scene)
        index = len(dataset.questions)
        dataset.questions.append(_question_json(entry, index, scene, split))
        dataset.manifest.append(_manifest_entry(entry, index, scene))
    return dataset
