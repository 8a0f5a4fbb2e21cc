"""Execute every question of a CLEVR questions file on its scene: `clevr-game answer`.

The whole process is what a user waits for, so the work is arranged around the
file rather than the question:

- the cyclic garbage collector is paused while the files are read and answered:
  decoding builds millions of small containers and every few hundred of them the
  collector walks everything built so far (json.load of a 45 MB questions file:
  2.4 s with it, 0.5 s without); nothing here makes garbage cycles;
- with msgspec installed, a question is decoded into the few fields that are
  read, and its program is kept as its raw JSON text: equal programs (a file
  asks a template's program on many scenes) are parsed, validated and
  type-checked once; without it, the standard json module reads the file and
  programs are told apart by their repr;
- each scene's facts are compiled once, not once per question;
- a program asked a few times is answered on the cold path (cold.py), one asked
  more often on the step interpreter, one asked very often on generated code.

Anything unusual in the questions file (a missing field, a value of an odd type,
an unknown image_index) sends the file to the full reader of clevr_game.dataset,
which names the file, question and field: the fast reader only ever accepts what
the full reader accepts, and gives the same questions.
"""

from __future__ import annotations

import contextlib
import gc
import json
import operator
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clevr_game.dataset import ANY_VOCABULARY, load_dataset
from clevr_game.errors import InputError
from clevr_game.layout import judge_scenes
from clevr_game.programs import Program, SceneFacts, compile_program, compile_scene, parse_program
from clevr_game.programs.cold import NotPlain, cold_answer
from clevr_game.programs.program import validate_values
from clevr_game.programs.signatures import check_program
from clevr_game.scene import Scene, load_scenes, write_text_atomic
from clevr_game.vocab import Vocabulary

try:  # the fast reader; without it the standard json module reads the questions
    import msgspec
except ImportError:  # pragma: no cover - msgspec is a dependency; the fallback is tested by forcing it
    msgspec = None

# Measured on CLEVR's question programs (9 nodes): a cold answer ~3.7 us; the step
# interpreter ~11 us to build, then ~2.3 us an answer; generated code ~140 us more to
# build, then ~0.5 us an answer. Each tier pays off from about these many answers.
INTERPRET_FROM = 8
"""A program asked this often gets the step interpreter."""

GENERATE_FROM = 75
"""A program asked this often gets generated code."""


@dataclass
class QuestionTable:
    """The questions of a file, column by column; equal programs are one Program object."""

    indices: list[Any]
    """question_index as written to the predictions (the position when the file has none)."""
    image_indices: list[int]
    programs: list[Program]
    answers: list[str | None]
    """The ground truth, None where the question has none."""


class NeedsFullReader(Exception):
    """The fast reader met something only the full reader (clevr_game.dataset) should judge."""


def answer_files(
    scenes_path: str | os.PathLike[str],
    questions_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None = None,
    *,
    note: Callable[[str], object] | None = None,
) -> tuple[int, int]:
    """(correct, answered-with-ground-truth); optionally write the predictions as JSON.

    :param note: called with one line about inputs answered all the same (scenes that
        break CLEVR's placement rules), before any answer.
    """
    with _collector_paused():
        # Everything big is freed when _answer_files returns, before the collector is back.
        return _answer_files(scenes_path, questions_path, out_path, note)


def rule_breaking_note(scenes: list[Scene], name: str) -> str | None:
    """One line counting the scenes that break CLEVR's placement rules (clevr_game.layout), or None."""
    verdicts = judge_scenes(scenes)
    broken = [position for position, verdict in enumerate(verdicts) if verdict is not None]
    if not broken:
        return None
    first = broken[0]
    return (f"{name}: {len(broken)} of {len(scenes)} scenes break CLEVR's placement rules "
            f"(first: scene {first}: {verdicts[first].reason()}); answered as they are")


def _answer_files(
    scenes_path: str | os.PathLike[str],
    questions_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None,
    note: Callable[[str], object] | None,
) -> tuple[int, int]:
    scenes = load_scenes(scenes_path)
    if note is not None:
        line = rule_breaking_note(scenes, Path(scenes_path).name)
        if line is not None:
            note(line)
    try:
        table = read_questions_fast(questions_path, scenes)
    except NeedsFullReader:
        table = _read_questions_full(scenes_path, questions_path)
    predicted = answer_table(table, _scenes_by_index(scenes))
    if out_path is not None:
        write_text_atomic(out_path, predictions_json(table, predicted))
    total = len(table.answers) - table.answers.count(None)
    return sum(map(operator.eq, table.answers, predicted)), total  # None never equals an answer


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _scenes_by_index(scenes: list[Scene]) -> dict[int, Scene]:
    # As dataset.match_scenes: a scene without image_index is found by its position.
    return {scene.image_index if scene.image_index is not None else i: scene for i, scene in enumerate(scenes)}


# ------------------------------------------------------------------ reading


def _read_questions_full(scenes_path: str | os.PathLike[str], questions_path: str | os.PathLike[str]) -> QuestionTable:
    """The full reader: raises the InputError naming what is wrong, or reads what the fast one would not."""
    _, questions, _ = load_dataset(scenes_path, questions_path)
    shared: dict[Program, Program] = {}
    return QuestionTable(
        indices=[q.index for q in questions],
        image_indices=[q.image_index for q in questions],
        programs=[shared.setdefault(q.program, q.program) for q in questions],
        answers=[q.answer for q in questions],
    )


if msgspec is not None:

    class _Question(msgspec.Struct):
        """The fields of a question that are read or checked; the rest is skipped unread."""

        image_index: int
        program: msgspec.Raw
        question: str = ""
        answer: str | int | bool | None = None
        question_family_index: int | None = None
        question_index: Any = msgspec.UNSET

    class _QuestionsFile(msgspec.Struct):
        questions: list[_Question]

    _DECODER = msgspec.json.Decoder(_QuestionsFile | list[_Question])


def read_questions_fast(
    questions_path: str | os.PathLike[str], scenes: list[Scene], *, use_msgspec: bool = True
) -> QuestionTable:
    """The questions of a file, validated as `load_dataset` does; NeedsFullReader for anything it would not take.

    `use_msgspec=False` reads with the standard json module, as when msgspec is not installed.
    """
    try:
        data = Path(questions_path).read_bytes()
        if not data.isascii():  # ASCII is UTF-8; the check is ten times cheaper than decoding
            data.decode("utf-8")  # the full reader reads text: a file that is not UTF-8 is its error to name
    except (OSError, UnicodeDecodeError):
        raise NeedsFullReader from None
    vocabularies = {scene.vocabulary for scene in scenes}
    common = vocabularies.pop() if len(vocabularies) == 1 else ANY_VOCABULARY
    programs = _ProgramCache(common)
    if msgspec is not None and use_msgspec:
        table = _fast_rows_msgspec(data, programs)
    else:
        table = _fast_rows_json(data, programs)
    by_index = _scenes_by_index(scenes)
    if not by_index.keys() >= set(table.image_indices):
        raise NeedsFullReader
    if common is ANY_VOCABULARY:  # scenes of several vocabularies: each question against its own scene's
        checked: set[tuple[int, Vocabulary]] = set()
        for program, image_index in zip(table.programs, table.image_indices, strict=True):
            key = (id(program), by_index[image_index].vocabulary)
            if key not in checked:
                programs.validate(program, key[1])
                checked.add(key)
    return table


class _ProgramCache:
    """Program text -> Program, parsed and validated once per distinct text."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.by_text: dict[Any, Program] = {}

    def parse(self, text: Any, data: Any) -> Program:
        try:
            program = parse_program(data)
        except InputError:
            raise NeedsFullReader from None
        self.validate(program, self.vocabulary)
        self.by_text[text] = program
        return program

    @staticmethod
    def validate(program: Program, vocabulary: Vocabulary) -> None:
        try:
            validate_values(program, vocabulary)
        except InputError:
            raise NeedsFullReader from None


def _fast_rows_msgspec(data: bytes, programs: _ProgramCache) -> QuestionTable:
    try:
        decoded = _DECODER.decode(data)
    except (msgspec.MsgspecError, RecursionError):  # too deep even to skip: the full reader names the file
        raise NeedsFullReader from None
    records = decoded if isinstance(decoded, list) else decoded.questions
    # Column by column: a comprehension costs a fraction of a loop's appends.
    texts = [bytes(record.program) for record in records]
    by_text = programs.by_text
    for text in dict.fromkeys(texts):
        if text not in by_text:
            try:
                programs.parse(text, msgspec.json.decode(text))
            except (msgspec.MsgspecError, RecursionError):
                raise NeedsFullReader from None
    answers = [record.answer for record in records]
    unset = msgspec.UNSET
    return QuestionTable(
        indices=[index if index is not unset and isinstance(index, int) else position
                 for position, index in enumerate([record.question_index for record in records])],
        image_indices=[record.image_index for record in records],
        programs=[by_text[text] for text in texts],
        answers=[answer if answer is None or type(answer) is str else _answer_text(answer) for answer in answers],
    )


def _fast_rows_json(data: bytes, programs: _ProgramCache) -> QuestionTable:
    try:
        document = json.loads(data.decode("utf-8"))  # as text, like the full reader (which refuses a BOM)
    except (ValueError, RecursionError):
        raise NeedsFullReader from None
    records = document.get("questions") if isinstance(document, dict) else document
    if not isinstance(records, list):
        raise NeedsFullReader
    indices, image_indices, table_programs, answers = [], [], [], []
    by_text = programs.by_text
    for position, record in enumerate(records):
        if type(record) is not dict or type(record.get("image_index")) is not int \
                or type(record.get("question", "")) is not str or "program" not in record:
            raise NeedsFullReader
        family = record.get("question_family_index")
        if family is not None and type(family) is not int:
            raise NeedsFullReader
        raw_program = record["program"]
        try:
            text = repr(raw_program)  # equal reprs are equal JSON values
        except RecursionError:  # parsed at the parser's depth limit, too deep to print back
            raise NeedsFullReader from None
        program = by_text.get(text)
        if program is None:
            program = programs.parse(text, raw_program)
        table_programs.append(program)
        image_indices.append(record["image_index"])
        answers.append(_answer_text(record.get("answer")))
        index = record.get("question_index", position)
        indices.append(index if isinstance(index, int) else position)
    return QuestionTable(indices, image_indices, table_programs, answers)


def _answer_text(answer: Any) -> str | None:
    """The ground truth as dataset.parse_question keeps it."""
    if answer is None or type(answer) is str:
        return answer
    if type(answer) is bool:
        return "yes" if answer else "no"
    if type(answer) is int:
        return str(answer)
    raise NeedsFullReader


# ------------------------------------------------------------------ answering


def answer_table(table: QuestionTable, scenes: dict[int, Scene]) -> list[str]:
    """Every question's answer, in order; InputError for the first ill-typed program in file order."""
    asked: dict[int, list[int]] = {}  # program id -> positions asking it, in order of first use
    for position, program in enumerate(table.programs):
        asked.setdefault(id(program), []).append(position)
    # Type errors before any answer, first use first (as one pass in file order would meet them).
    runs = [(_runner(table.programs[positions[0]], len(positions)), positions) for positions in asked.values()]
    facts = {image_index: compile_scene(scenes[image_index]) for image_index in dict.fromkeys(table.image_indices)}
    facts_of = [facts[image_index] for image_index in table.image_indices]
    predicted: list[str] = [""] * len(facts_of)
    for answer, positions in runs:
        for position in positions:
            predicted[position] = answer(facts_of[position])
    return predicted


def _runner(program: Program, uses: int) -> Any:
    """The cheapest way to answer `program` `uses` times: cold walks, the interpreter, or generated code.

    Type-checks the program: InputError naming the node.
    """
    if uses >= GENERATE_FROM:
        return compile_program(program).generate()
    if uses >= INTERPRET_FROM:
        return compile_program(program).interpreter.answer
    check_program(program)

    def cold(facts: SceneFacts) -> str:
        try:
            return cold_answer(program, facts)
        except NotPlain:  # checked above, so only an unusual but valid program gets here
            return compile_program(program).answer(facts)

    return cold


def predictions_json(table: QuestionTable, predicted: list[str]) -> str:
    """The predictions file, as json.dumps({"predictions": [...]}) writes it."""
    return json.dumps({"predictions": [
        {"question_index": index, "image_index": image_index, "answer": answer}
        for index, image_index, answer in zip(table.indices, table.image_indices, predicted, strict=True)
    ]})
