"""Scenes and questions as the arrays a state-input player reads (numpy only, no torch).

Objects: position in the camera's ground frame (the scene's own `right` and
`behind` directions, divided by 3 so the CLEVR table spans about -1..1) and
attribute ids against the CLEVR-POC vocabulary, whose value lists contain
CLEVR's, so a CLEVR-POC scene encodes without a crash. Using the scene's own
directions makes left/right/front/behind one coordinate each, as CLEVR defines
them, also on real CLEVR scenes whose camera was jittered.

Questions: `clevr_game.text` tokens; a word the checkpoint's vocabulary does
not know becomes the UNKNOWN id (1), never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clevr_game.dataset import Question
from clevr_game.errors import InputError
from clevr_game.scene import MAX_OBJECTS, Scene
from clevr_game.text import MAX_QUESTION_TOKENS as MAX_QUESTION_TOKENS
from clevr_game.text import WordVocabulary
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC

POSITION_SCALE = 3.0
"""Half the width of the CLEVR table in world units."""

ATTRIBUTE_TABLE_SIZES: tuple[int, ...] = tuple(len(CLEVR_POC.values(a)) for a in ATTRIBUTES)
"""Embedding rows per attribute (CLEVR-POC's value lists, which include CLEVR's)."""

ANSWERS: tuple[str, ...] = CLEVR_POC.answer_values
"""The answer classes: yes, no, 0..10, then every attribute value."""

_ANSWER_CLASS = {answer: index for index, answer in enumerate(ANSWERS)}


@dataclass(frozen=True)
class SceneArrays:
    """A batch of scenes: positions (B, 10, 2) float32, attribute ids (B, 10, 4) int64, present (B, 10) bool."""

    positions: np.ndarray
    attributes: np.ndarray
    present: np.ndarray


def _attribute_index(attribute: str, value: str, where: str) -> int:
    try:
        return CLEVR_POC.index(attribute, value)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


def scene_features(scene: Scene, where: str = "scene") -> tuple[np.ndarray, np.ndarray]:
    """(N, 2) ground-frame positions / 3 and (N, 4) CLEVR-POC attribute ids of one scene.

    InputError (one line) for more than MAX_OBJECTS objects or an unknown attribute value.
    """
    if len(scene.objects) > MAX_OBJECTS:
        raise InputError(f"{where}: {len(scene.objects)} objects, a state player reads at most {MAX_OBJECTS}")
    axes = np.array([scene.directions["right"][:2], scene.directions["behind"][:2]], dtype=np.float64)
    positions = (scene.coords()[:, :2] @ axes.T) / POSITION_SCALE
    attributes = np.array(
        [
            [_attribute_index(a, obj.attribute(a), f"{where}, object {i}") for a in ATTRIBUTES]
            for i, obj in enumerate(scene.objects)
        ],
        dtype=np.int64,
    ).reshape(-1, len(ATTRIBUTES))
    return positions.astype(np.float32), attributes


def scene_arrays(scenes: Sequence[Scene], where: str = "scene") -> SceneArrays:
    """Scenes padded to MAX_OBJECTS slots."""
    count = len(scenes)
    positions = np.zeros((count, MAX_OBJECTS, 2), dtype=np.float32)
    attributes = np.zeros((count, MAX_OBJECTS, len(ATTRIBUTES)), dtype=np.int64)
    present = np.zeros((count, MAX_OBJECTS), dtype=bool)
    for row, scene in enumerate(scenes):
        name = f"{where} {scene.image_index if scene.image_index is not None else row}"
        pos, attr = scene_features(scene, name)
        positions[row, : len(pos)] = pos
        attributes[row, : len(attr)] = attr
        present[row, : len(pos)] = True
    return SceneArrays(positions, attributes, present)


def question_ids(texts: Sequence[str], vocabulary: WordVocabulary, length: int = MAX_QUESTION_TOKENS) -> np.ndarray:
    """(B, length) word ids, 0-padded; unknown words map to the UNKNOWN id 1."""
    out = np.zeros((len(texts), length), dtype=np.int64)
    for row, text in enumerate(texts):
        out[row] = vocabulary.encode(text, length)
    return out


def answer_index(answer: str, where: str) -> int:
    """The class of a ground-truth answer; InputError for one outside ANSWERS."""
    index = _ANSWER_CLASS.get(answer.strip().lower())
    if index is None:
        raise InputError(f"{where}: answer {answer!r} is not a CLEVR answer value")
    return index


def family_name(question: Question) -> str:
    """The template file stem (`one_hop`) when the question has one, else its family index."""
    template = question.raw.get("template_filename")
    if isinstance(template, str) and template:
        return Path(template).stem
    return str(question.family) if question.family is not None else "unknown"
