"""The attacked items, looked up by id (`image_index:question_index`) in their dataset folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clevr_game.dataset import Question, dataset_files, load_dataset
from clevr_game.errors import InputError
from clevr_game.scene import Scene


@dataclass(frozen=True)
class SourceItem:
    item_id: str
    question: Question
    scene: Scene


class ItemCatalogue:
    """The items of every dataset folder asked for, each folder read once."""

    def __init__(self) -> None:
        self._folders: dict[Path, dict[str, SourceItem]] = {}

    def _load(self, folder: Path) -> dict[str, SourceItem]:
        if (folder / "items.json").is_file():
            raise InputError(f"{folder}: CLEVR-POC items (set answers, environments) cannot be exported yet")
        scenes_path, questions_path = dataset_files(folder)
        _, questions, scene_of = load_dataset(scenes_path, questions_path)
        return {
            f"{q.image_index}:{q.index}": SourceItem(f"{q.image_index}:{q.index}", q, scene)
            for q, scene in zip(questions, scene_of, strict=True)
        }

    def get(self, folder: Path, item_id: str, where: str) -> SourceItem:
        key = folder.resolve()
        if key not in self._folders:
            self._folders[key] = self._load(folder)
        item = self._folders[key].get(item_id)
        if item is None:
            raise InputError(f"{where}: item {item_id!r} is not in {folder} (the run was made on other items)")
        return item
