"""The Visual-QA player protocol: queries in, answers out, faults recorded as answers.

A player is a black box. The game hands it a batch of `Query` objects holding only
what the player declared it needs (`scene`, `image`, `program`) and gets back one
`Answer` per query, in order. A failure is an `Answer` with `error` set, never an
exception, so one bad answer never stops a run.

Answers are checked against the answer vocabulary of the query (the scene's
vocabulary, or the one given to the query). CLEVR-POC answers are sets of values;
their canonical text is the distinct values, sorted alphabetically, joined by ','
(`canonical_answer`).

The wire form shared by the subprocess and HTTP players (`query_to_wire`,
`answer_from_wire`) is documented in docs/players.md.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any

# one_line, shown and the set-answer names belong to the world, which reads and checks game items
# below the players; re-exported here for the players and their callers.
from clevr_game.errors import InputError
from clevr_game.errors import one_line as one_line
from clevr_game.errors import shown as shown
from clevr_game.programs import Program, program_to_json
from clevr_game.scene import Scene
from clevr_game.vocab import CLEVR, SET_ANSWER_VOCABULARIES, SET_SEPARATOR, Vocabulary

NEED_SCENE = "scene"
NEED_IMAGE = "image"
NEED_PROGRAM = "program"
KNOWN_NEEDS: frozenset[str] = frozenset({NEED_SCENE, NEED_IMAGE, NEED_PROGRAM})

IMAGE_PATH_FIELD = "image"
"""The query field holding the path of the rendered PNG (the default way to send an image)."""
IMAGE_INLINE_FIELD = "image_png_base64"
"""The query field holding the PNG itself, base64-encoded: an HTTP player sent images inline reads this one."""


class AnswerError(ValueError):
    """An answer that is not a value of the answer vocabulary; the message is one line."""


@dataclass(frozen=True)
class Query:
    """One question put to a player.

    `scene`, `image_path` and `program` are filled only for players that need them
    (see `restricted_to`); `vocabulary` says which answers are valid when no scene
    is given (a pixel player sees no scene).
    """

    item_id: str
    question: str
    scene: Scene | None = None
    image_path: str | None = None
    program: Program | None = None
    vocabulary: Vocabulary | None = None
    environment: str | None = None
    """CLEVR-POC: the item's environment, its `.lp` text (constraints under their English sentences).
    Part of the question, so every player gets it."""

    def answer_vocabulary(self) -> Vocabulary:
        if self.vocabulary is not None:
            return self.vocabulary
        if self.scene is not None:
            return self.scene.vocabulary
        return CLEVR

    def restricted_to(self, needs: frozenset[str]) -> Query:
        """A copy carrying only what a player with `needs` may see; the vocabulary is kept."""
        return dataclasses.replace(
            self,
            scene=self.scene if NEED_SCENE in needs else None,
            image_path=self.image_path if NEED_IMAGE in needs else None,
            program=self.program if NEED_PROGRAM in needs else None,
            vocabulary=self.answer_vocabulary(),
        )


@dataclass(frozen=True)
class Answer:
    """A player's answer to one query: canonical `text`, or a one-line `error`."""

    item_id: str
    text: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def failed(cls, item_id: str, error: str) -> Answer:
        return cls(item_id, None, one_line(error))


@dataclass(frozen=True)
class ImageSpec:
    """Render preset and image size of a pixel player."""

    preset: str = "fast"
    width: int = 128
    height: int = 96

    def checked(self) -> ImageSpec:
        """This spec, or InputError for an unknown preset or a bad size (the renderer's own checks)."""
        from clevr_game.render.presets import get_preset

        get_preset(self.preset, self.width, self.height)
        return self

    @property
    def label(self) -> str:
        return f"{self.preset}-{self.width}x{self.height}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, source: str) -> ImageSpec:
        if not isinstance(data, dict):
            raise InputError(f"{source}: field 'image' must be a dict with preset, width and height")
        try:
            return cls(str(data["preset"]), int(data["width"]), int(data["height"]))
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{source}: field 'image' needs preset, width and height, got {data!r}") from None


class Player(ABC):
    """A Visual-QA player seen only through `answer_batch`.

    Subclasses set `name` and `needs` (a subset of KNOWN_NEEDS); a player that
    needs images sets `image_spec`, the render preset and size it reads (the game
    renders what it is shown with it). `answer_batch` must return exactly one
    Answer per query, in order, and must not raise for a fault of the model:
    faults are error answers.
    """

    name: str = "player"
    needs: frozenset[str] = frozenset()
    image_spec: ImageSpec | None = None

    @abstractmethod
    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        """One Answer per query, in the order of `queries`."""

    def answer(self, query: Query) -> Answer:
        return self.answer_batch([query])[0]

    def close(self) -> None:
        """Release processes and connections; a closed player must not be used again."""
        return None  # an in-process player holds nothing to release

    def __enter__(self) -> Player:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, needs={sorted(self.needs)})"


def check_needs(needs: Sequence[str] | frozenset[str]) -> frozenset[str]:
    """`needs` as a frozenset; ValueError naming any unknown need."""
    result = frozenset(needs)
    unknown = result - KNOWN_NEEDS
    if unknown:
        raise ValueError(
            f"unknown player needs {sorted(unknown)} (expected a subset of {sorted(KNOWN_NEEDS)})"
        )
    return result


def image_spec_for(needs: frozenset[str], spec: ImageSpec | None) -> ImageSpec | None:
    """The checked image spec of an external player with `needs`; ValueError for a spec without need `image`."""
    if spec is None:
        return None
    if NEED_IMAGE not in needs:
        raise ValueError(f"an image spec ({spec.label}) is for a player that needs {NEED_IMAGE!r}, "
                         f"not one that needs {sorted(needs)}")
    return spec.checked()


def _answer_value(raw: Any) -> str:
    # Numbers may come as JSON integers; booleans are not integers here (True is no count).
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise AnswerError(f"answer value {shown(raw)} is not a string")
    value = str(raw).strip().lower()
    if not value:
        raise AnswerError("empty answer")
    return value


def canonical_answer(raw: Any, vocabulary: Vocabulary = CLEVR) -> str:
    """The canonical text of a raw answer; AnswerError when outside the answer vocabulary.

    A single value (string, or integer for counts) is stripped and lower-cased. For a
    set-answer vocabulary (CLEVR-POC), a list of values or a ','-separated string is
    a set: distinct values sorted alphabetically and joined by ',' (`red,blue` and
    `["blue", "red"]` both become `blue,red`).
    """
    if isinstance(raw, (list, tuple)):
        values = [_answer_value(v) for v in raw]
    else:
        values = [part.strip() for part in _answer_value(raw).split(SET_SEPARATOR)]
    if not values:
        raise AnswerError("empty answer")
    distinct = sorted(set(values))
    if len(distinct) > 1 and vocabulary.name not in SET_ANSWER_VOCABULARIES:
        raise AnswerError(
            f"answer {shown(raw)} has several values; {vocabulary.name} answers are single values"
        )
    allowed = set(vocabulary.answer_values)
    for value in distinct:
        if value not in allowed:
            raise AnswerError(f"answer {shown(value)} is not in the {vocabulary.name} answer vocabulary")
    return SET_SEPARATOR.join(distinct)


def checked_answer(query: Query, raw: Any, who: str) -> Answer:
    """An Answer for `query` from a raw value: canonical text, or an error naming `who`."""
    try:
        return Answer(query.item_id, canonical_answer(raw, query.answer_vocabulary()))
    except AnswerError as exc:
        return Answer.failed(query.item_id, f"{who}: query {query.item_id!r}: {exc}")


# ---------------------------------------------------------------- the wire form (JSON)


def query_to_wire(query: Query, needs: frozenset[str]) -> dict[str, Any]:
    """The JSON object sent to an external player: id, question and what it needs."""
    wire: dict[str, Any] = {"id": query.item_id, "question": query.question}
    if NEED_SCENE in needs and query.scene is not None:
        wire["scene"] = query.scene.to_json()
    if NEED_IMAGE in needs and query.image_path is not None:
        wire[IMAGE_PATH_FIELD] = str(query.image_path)
    if NEED_PROGRAM in needs and query.program is not None:
        wire["program"] = program_to_json(query.program)
    if query.environment is not None:
        wire["environment"] = query.environment
    return wire


def answer_from_wire(query: Query, data: Any, who: str) -> Answer:
    """Check one decoded answer object against the query it should answer."""
    where = f"{who}: query {query.item_id!r}"
    if not isinstance(data, dict):
        return Answer.failed(query.item_id, f"{where}: answer is not a JSON object: {shown(data)}")
    if "id" not in data:
        return Answer.failed(query.item_id, f"{where}: answer has no 'id'")
    if str(data["id"]) != query.item_id:
        return Answer.failed(
            query.item_id, f"{where}: answer has the wrong id {shown(data['id'])} (answers must come in query order)"
        )
    if data.get("error") is not None:
        return Answer.failed(query.item_id, f"{where}: player reported an error: {data['error']}")
    if "answer" not in data:
        return Answer.failed(query.item_id, f"{where}: answer has no 'answer'")
    return checked_answer(query, data["answer"], who)
