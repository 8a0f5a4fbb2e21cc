"""An item folder's scenes, questions, families and kinds by item id: the labels of per-item results and the gallery."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from clevr_game.errors import InputError
from clevr_game.scene import Scene


@dataclass
class ItemsFolder:
    """Scenes, questions, families and kinds of an item folder, by item id."""

    scenes: dict[str, Scene] = field(default_factory=dict)
    questions: dict[str, str] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)

def read_items_folder(items_dir: str) -> ItemsFolder | None:
    """Item folder contents by item id; None when the folder cannot be read any more."""
    from agents.evaluation import question_kind
    from clevr_game.dataset import load_dataset
    from envs.items import load_items

    found = ItemsFolder()
    try:
        scenes, questions = Path(items_dir) / "scenes.json", Path(items_dir) / "questions.json"
        if scenes.is_file() and questions.is_file():
            _, parsed, scene_of = load_dataset(scenes, questions)
            for question, scene in zip(parsed, scene_of, strict=True):
                item_id = f"{question.image_index}:{question.index}"
                found.scenes[item_id], found.questions[item_id] = scene, question.text
                template = question.raw.get("template_filename")
                if isinstance(template, str):
                    found.families[item_id] = template.rsplit(".", 1)[0]
                elif question.family is not None:
                    found.families[item_id] = f"family {question.family}"
                kind = question_kind(question.program)
                if kind is not None:
                    found.kinds[item_id] = kind
        else:
            for item in load_items(items_dir):
                found.scenes[item.item_id], found.questions[item.item_id] = item.scene, item.question
                attribute = item.extra.get("query_attribute")
                if attribute is not None:  # CLEVR-POC: one family per asked attribute of the hidden object
                    found.families[item.item_id] = f"hidden {attribute}"
                kind = question_kind(item.program)
                if kind is not None:
                    found.kinds[item.item_id] = kind
    except InputError:
        return None
    return found

