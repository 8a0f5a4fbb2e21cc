"""Black-box players: the oracle on real CLEVR, subprocess and HTTP players, healthy and faulty.

Faulty players are real: a script run as a subprocess and an http.server on 127.0.0.1
that misbehave on request. Every fault must come back as a one-line error answer,
and the queries after it must still be answered.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from clevr_game.errors import InputError
from clevr_game.programs import parse_program, reference_execute
from clevr_game.scene import Scene, SceneObject, load_scenes
from clevr_game.vocab import CLEVR, CLEVR_POC
from players import (
    Answer,
    AnswerError,
    HttpPlayer,
    OraclePlayer,
    Player,
    Query,
    SubprocessPlayer,
    canonical_answer,
    load,
    register,
)
from players.examples.majority_player import answer_question
from players.protocol import query_to_wire

REPO = Path(__file__).resolve().parents[1]
# Healthy players get budgets no loaded machine reaches; only a player that hangs for
# ever meets HANG_TIMEOUT_S, and tests assert on what happened, not on how long it took.
GENEROUS = {"timeout_s": 30.0, "startup_timeout_s": 30.0}
HANG_TIMEOUT_S = 2.0

# A player that answers right (by running the program when it is sent) unless the
# question names a fault to show.
FAULTY_PLAYER = r'''
import json, os, sys, time

for line in sys.stdin:
    query = json.loads(line)
    question = query["question"]
    answer = {"id": query["id"], "answer": "yes"}
    if question == "crash":
        sys.stderr.write("boom: asked to crash\n")
        sys.stderr.flush()
        sys.exit(3)
    elif question == "hang":
        while True:
            time.sleep(60)
    elif question == "garbage":
        print("this is not json", flush=True)  # skipped: the answer follows
    elif question == "oov":
        answer["answer"] = "banana"
    elif question == "wrongid":
        print(json.dumps({"id": "not-" + query["id"], "answer": "no"}), flush=True)
    elif question == "error":
        answer = {"id": query["id"], "error": "model failed"}
    elif question == "pad":
        answer["note"] = "x" * 5000
    elif question == "image?":
        seen = "image" in query and os.path.isfile(query["image"]) and "scene" not in query
        answer["answer"] = "yes" if seen else "no"
    elif "program" in query:
        from clevr_game.programs import parse_program, reference_execute
        answer["answer"] = reference_execute(parse_program(query["program"]), query["scene"])
    print(answer if isinstance(answer, str) else json.dumps(answer), flush=True)
'''


def _real_items(clevr_real: Path) -> tuple[list[Query], list[str]]:
    scenes = load_scenes(clevr_real / "CLEVR_val_scenes_sample11.json")
    questions = json.loads((clevr_real / "CLEVR_val_questions_sample9.json").read_text())["questions"]
    queries = [
        Query(f"q{i}", q["question"], scenes[q["image_index"]], program=parse_program(q["program"]))
        for i, q in enumerate(questions)
    ]
    return queries, [q["answer"] for q in questions]


@pytest.fixture(scope="module")
def real_items(clevr_real: Path) -> tuple[list[Query], list[str]]:
    return _real_items(clevr_real)


@pytest.fixture(scope="module")
def tiny_scene() -> Scene:
    objects = [
        SceneObject("large", "red", "metal", "cube", (-2.0, -2.0, 0.7)),
        SceneObject("small", "red", "rubber", "sphere", (2.0, 2.0, 0.35)),
        SceneObject("small", "blue", "rubber", "cube", (0.0, 2.0, 0.35)),
    ]
    return Scene(objects)


@pytest.fixture(scope="module")
def faulty_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("players") / "faulty_player.py"
    path.write_text(FAULTY_PLAYER)
    return path


def _player_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _faulty(script: Path, **kwargs: Any) -> SubprocessPlayer:
    options = {**GENEROUS, "needs": {"scene", "program"}, "env": _player_env(), **kwargs}
    return SubprocessPlayer([sys.executable, str(script)], **options)


def _ask(questions: list[str], scene: Scene) -> list[Query]:
    program = parse_program([{"function": "scene", "inputs": []}, {"function": "exist", "inputs": [0]}])
    return [Query(f"q{i}", text, scene, program=program) for i, text in enumerate(questions)]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _assert_one_line_errors(answers: list[Answer]) -> None:
    for answer in answers:
        if answer.error is not None:
            assert "\n" not in answer.error and answer.text is None


# ---------------------------------------------------------------- answers and the vocabulary


def test_canonical_answer_accepts_vocabulary_values_and_normalises() -> None:
    assert canonical_answer(" Yes ") == "yes"
    assert canonical_answer(3) == "3"
    assert canonical_answer("cylinder", CLEVR) == "cylinder"
    assert canonical_answer(["cone"], CLEVR_POC) == "cone"


def test_canonical_answer_joins_set_answers_sorted_for_clevr_poc() -> None:
    assert canonical_answer(["red", "blue", "red"], CLEVR_POC) == "blue,red"
    assert canonical_answer("red, blue", CLEVR_POC) == "blue,red"
    assert canonical_answer("blue,red", CLEVR_POC) == canonical_answer(["red", "blue"], CLEVR_POC)


@pytest.mark.parametrize(
    ("raw", "vocabulary", "message"),
    [
        ("banana", CLEVR, "'banana' is not in the clevr answer vocabulary"),
        ("cone", CLEVR, "'cone' is not in the clevr answer vocabulary"),
        ("medium", CLEVR, "'medium' is not in the clevr answer vocabulary"),
        (["red", "blue"], CLEVR, "has several values; clevr answers are single values"),
        (["red", "banana"], CLEVR_POC, "'banana' is not in the clevr-poc answer vocabulary"),
        ("", CLEVR, "empty answer"),
        ([], CLEVR_POC, "empty answer"),
        (True, CLEVR, "is not a string"),
        (None, CLEVR, "is not a string"),
        ({"a": 1}, CLEVR, "is not a string"),
        ("11", CLEVR, "'11' is not in the clevr answer vocabulary"),
    ],
)
def test_canonical_answer_rejects_out_of_vocabulary(raw: Any, vocabulary: Any, message: str) -> None:
    with pytest.raises(AnswerError, match=message.replace("(", r"\(")):
        canonical_answer(raw, vocabulary)


def test_query_restricted_to_needs_keeps_only_what_a_player_may_see(
    real_items: tuple[list[Query], list[str]],
) -> None:
    query = real_items[0][0]
    query = Query(query.item_id, query.question, query.scene, "/img.png", query.program)
    pixel_only = query.restricted_to(frozenset({"image"}))
    assert (pixel_only.scene, pixel_only.program, pixel_only.image_path) == (None, None, "/img.png")
    assert pixel_only.answer_vocabulary() is CLEVR
    wire = query_to_wire(query, frozenset({"image"}))
    assert wire == {"id": query.item_id, "question": query.question, "image": "/img.png"}
    state_wire = query_to_wire(query, frozenset({"scene", "program"}))
    assert state_wire["scene"]["objects"] == query.scene.to_json()["objects"]
    assert parse_program(state_wire["program"]) == query.program


# ---------------------------------------------------------------- the oracle


def test_oracle_answers_equal_stored_answers_of_real_clevr_questions(
    real_items: tuple[list[Query], list[str]],
) -> None:
    queries, expected = real_items
    with OraclePlayer() as oracle:
        answers = oracle.answer_batch(queries)
    assert [a.error for a in answers] == [None] * len(queries)
    assert [a.text for a in answers] == expected
    assert [a.item_id for a in answers] == [q.item_id for q in queries]


def test_oracle_reports_missing_inputs_and_invalid_programs(tiny_scene: Scene) -> None:
    unique_of_three = parse_program(
        [{"function": "scene", "inputs": []}, {"function": "unique", "inputs": [0]},
         {"function": "query_color", "inputs": [1]}]
    )
    queries = [
        Query("no-program", "Is there a cube?", tiny_scene),
        Query("invalid", "What color is the thing?", tiny_scene, program=unique_of_three),
    ]
    answers = OraclePlayer().answer_batch(queries)
    assert answers[0].error == "oracle: query 'no-program': no program given (the oracle needs scene and program)"
    assert answers[1].error is not None and "program has no answer on this scene" in answers[1].error


# ---------------------------------------------------------------- the subprocess player


def test_subprocess_player_answers_real_questions_like_the_oracle(
    real_items: tuple[list[Query], list[str]], faulty_script: Path
) -> None:
    queries, expected = real_items
    with _faulty(faulty_script) as player:
        answers = player.answer_batch(queries)
        again = player.answer_batch(queries[:3])
        assert player.restarts == 0
    assert [a.text for a in answers] == expected
    assert [a.text for a in again] == expected[:3]


def test_majority_example_answers_by_its_rule(tiny_scene: Scene) -> None:
    questions = ["How many things are there?", "What color is the big cube?", "What is it made of?",
                 "What shape is the small thing?", "Is there a cube?"]
    expected = ["2", "red", "rubber", "cube", "yes"]
    queries = [Query(f"q{i}", text, tiny_scene) for i, text in enumerate(questions)]
    with load("majority", **GENEROUS) as player:
        answers = player.answer_batch(queries)
    assert [a.text for a in answers] == expected
    assert [answer_question(q, tiny_scene.to_json()) for q in questions] == expected


def test_subprocess_player_survives_a_crash_mid_batch(tiny_scene: Scene, faulty_script: Path) -> None:
    with _faulty(faulty_script) as player:
        answers = player.answer_batch(_ask(["ok", "crash", "ok", "ok"], tiny_scene))
        assert player.restarts == 1
        assert player.answer_batch(_ask(["ok"], tiny_scene))[0].text == "yes"
    assert answers[1].error == (
        f"{player.name}: query 'q1': process exited with code 3 before answering "
        "(last stderr: boom: asked to crash)"
    )
    assert [a.text for a in answers] == ["yes", None, "yes", "yes"]
    _assert_one_line_errors(answers)


def test_subprocess_player_kills_a_hang_and_goes_on(tiny_scene: Scene, faulty_script: Path) -> None:
    # The first answer of each process may take startup_timeout_s: only the hang meets the short timeout.
    with _faulty(faulty_script, timeout_s=HANG_TIMEOUT_S) as player:
        player.answer_batch(_ask(["ok"], tiny_scene))
        hung_pid = player.pid
        answers = player.answer_batch(_ask(["hang", "ok", "ok"], tiny_scene))
        assert hung_pid is not None and _gone(hung_pid)
        assert player.pid != hung_pid and player.restarts == 1
    assert answers[0].error == f"{player.name}: query 'q0': no answer within 2 s (hang); process killed"
    assert [a.text for a in answers] == [None, "yes", "yes"]


def test_subprocess_player_records_bad_answers_and_skips_stray_lines_without_restarting(
    tiny_scene: Scene, faulty_script: Path
) -> None:
    with _faulty(faulty_script) as player:
        answers = player.answer_batch(_ask(["garbage", "oov", "wrongid", "error", "ok", "pad"], tiny_scene))
        assert player.restarts == 0
        assert player.protocol_warnings == 2  # the line that is not JSON, the one with an id not asked
    where = f"{player.name}: query"
    assert [a.error for a in answers] == [
        None,
        f"{where} 'q1': answer 'banana' is not in the clevr answer vocabulary",
        None,
        f"{where} 'q3': player reported an error: model failed",
        None,
        None,
    ]
    assert [a.text for a in answers] == ["yes", None, "yes", None, "yes", "yes"]


def test_subprocess_player_gives_up_on_a_player_that_never_starts(tiny_scene: Scene) -> None:
    command = [sys.executable, "-c", "import sys; sys.stderr.write('no weights found\\n'); sys.exit(2)"]
    with SubprocessPlayer(command, max_restarts=1, **GENEROUS) as player:
        answers = player.answer_batch(_ask(["a", "b", "c", "d"], tiny_scene))
    assert answers[0].error == (
        f"{player.name}: query 'q0': process exited with code 2 before answering (last stderr: no weights found)"
    )
    assert answers[1].error == answers[0].error.replace("q0", "q1")
    assert answers[2].error is not None and answers[2].error.startswith(
        f"{player.name}: gave up after 2 failures in a row (max_restarts=1); last: query 'q1': process exited"
    )
    assert answers[3].error == answers[2].error
    _assert_one_line_errors(answers)


def test_subprocess_player_reports_a_command_that_cannot_start(tiny_scene: Scene) -> None:
    with SubprocessPlayer(["/nonexistent/vqa-model"], max_restarts=0, **GENEROUS) as player:
        answers = player.answer_batch(_ask(["a", "b"], tiny_scene))
    assert answers[0].error == (
        f"{player.name}: query 'q0': cannot start /nonexistent/vqa-model: No such file or directory"
    )
    assert answers[1].error is not None and "gave up after 1 failures in a row" in answers[1].error


def test_subprocess_player_streams_a_large_batch_without_deadlock(
    real_items: tuple[list[Query], list[str]], faulty_script: Path
) -> None:
    # Over half a megabyte each way: written then read in turn, both pipes would fill.
    scene = real_items[0][0].scene
    queries = [Query(f"q{i}", "pad", scene) for i in range(400)]
    assert sum(len(json.dumps(query_to_wire(q, frozenset({"scene"})))) for q in queries) > 500_000
    with _faulty(faulty_script, needs={"scene"}) as player:
        answers = player.answer_batch(queries)
    assert [a.item_id for a in answers] == [q.item_id for q in queries]
    assert {a.text for a in answers} == {"yes"}


def test_subprocess_player_detects_a_hang_while_its_stdin_is_full(
    real_items: tuple[list[Query], list[str]], faulty_script: Path
) -> None:
    # The hung process reads no more input; writing the batch must not block the game.
    scene = real_items[0][0].scene
    queries = _ask(["ok", "hang"], scene) + [Query(f"r{i}", "ok", scene) for i in range(150)]
    assert sum(len(json.dumps(query_to_wire(q, frozenset({"scene"})))) for q in queries) > 200_000
    with _faulty(faulty_script, needs={"scene"}) as player:
        player.answer_batch(queries[:1])  # started: the hang below meets the short timeout
        player.timeout_s = HANG_TIMEOUT_S
        answers = player.answer_batch(queries)
        player.timeout_s = GENEROUS["timeout_s"]
    assert answers[1].error == f"{player.name}: query 'q1': no answer within 2 s (hang); process killed"
    assert [a.text for a in answers[2:]] == ["yes"] * 150


def test_subprocess_player_sends_the_image_path_to_a_pixel_player(
    tiny_scene: Scene, faulty_script: Path, tmp_path: Path
) -> None:
    image = tmp_path / "scene.png"
    image.write_bytes(b"\x89PNG")
    query = Query("q0", "image?", tiny_scene, str(image))
    with _faulty(faulty_script, needs={"image"}) as player:
        assert player.answer(query.restricted_to(player.needs)).text == "yes"
        assert player.answer(query).text == "yes"  # the scene is held back on the wire


def test_closed_subprocess_player_answers_with_errors_and_leaves_no_process(
    tiny_scene: Scene, faulty_script: Path
) -> None:
    player = _faulty(faulty_script)
    player.answer_batch(_ask(["ok"], tiny_scene))
    pid = player.pid
    player.close()
    assert pid is not None and _gone(pid)
    answer = player.answer(_ask(["ok"], tiny_scene)[0])
    assert answer.error == f"{player.name}: player is closed"


# ---------------------------------------------------------------- the HTTP player


class _MisbehavingHandler(BaseHTTPRequestHandler):
    server: _PlayerServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # keep test output clean

    def do_POST(self) -> None:
        self.server.requests += 1
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.server.mode
        if mode == "slow":
            self.server.release.wait(5.0)
        if mode == "status500":
            self.send_error(500, "model exploded")
            return
        if mode == "garbage":
            self._reply(b"<html>not json</html>")
            return
        answers = [self._answer(query) for query in body["queries"]]
        if mode == "short":
            answers = answers[:-1]
        self._reply(json.dumps({"answers": answers}).encode())

    @staticmethod
    def _answer(query: dict[str, Any]) -> dict[str, Any]:
        if query["question"] == "oov":
            return {"id": query["id"], "answer": "banana"}
        if query["question"] == "wrongid":
            return {"id": "nope", "answer": "yes"}
        answer = reference_execute(parse_program(query["program"]), query["scene"]) if "program" in query else "yes"
        return {"id": query["id"], "answer": answer}

    def _reply(self, payload: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _PlayerServer(ThreadingHTTPServer):
    daemon_threads = True
    mode = "ok"
    requests = 0
    release: threading.Event


@pytest.fixture()
def server() -> Iterator[_PlayerServer]:
    httpd = _PlayerServer(("127.0.0.1", 0), _MisbehavingHandler)
    httpd.release = threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5.0)


def _url(server: _PlayerServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/answer"


def test_http_player_answers_real_questions_like_the_oracle(
    server: _PlayerServer, real_items: tuple[list[Query], list[str]]
) -> None:
    queries, expected = real_items
    player = load(_url(server), needs={"scene", "program"}, timeout_s=GENEROUS["timeout_s"], max_batch_size=4)
    assert isinstance(player, HttpPlayer)
    answers = player.answer_batch(queries)
    assert [a.text for a in answers] == expected
    assert server.requests == 3  # 9 queries in requests of at most 4


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("status500", "POST failed with HTTP 500 model exploded"),
        ("garbage", "malformed JSON response '<html>not json</html>'"),
        ("short", "response has 1 answers for 2 queries"),
        ("slow", "no complete response within 0.5 s"),
    ],
)
def test_http_player_fails_the_request_in_one_line_and_recovers(
    server: _PlayerServer, tiny_scene: Scene, mode: str, error: str
) -> None:
    # Only the server that never answers needs a short timeout to show.
    player = HttpPlayer(_url(server), timeout_s=0.5 if mode == "slow" else GENEROUS["timeout_s"])
    server.mode = mode
    answers = player.answer_batch(_ask(["ok", "ok"], tiny_scene))
    assert [a.error for a in answers] == [f"{player.name}: query 'q{i}': {error}" for i in range(2)]
    server.release.set()
    server.mode = "ok"
    player.timeout_s = GENEROUS["timeout_s"]
    assert [a.text for a in player.answer_batch(_ask(["ok", "ok"], tiny_scene))] == ["yes", "yes"]


def test_http_player_fails_single_bad_answers_only(server: _PlayerServer, tiny_scene: Scene) -> None:
    player = HttpPlayer(_url(server), timeout_s=GENEROUS["timeout_s"], name="remote")
    answers = player.answer_batch(_ask(["oov", "ok", "wrongid"], tiny_scene))
    assert [a.error for a in answers] == [
        "remote: query 'q0': answer 'banana' is not in the clevr answer vocabulary",
        None,
        "remote: query 'q2': answer has the wrong id 'nope' (answers must come in query order)",
    ]
    assert answers[1].text == "yes"


def test_http_player_reports_connection_refused(tiny_scene: Scene) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    player = HttpPlayer(f"http://127.0.0.1:{port}/", timeout_s=GENEROUS["timeout_s"], name="down")
    answers = player.answer_batch(_ask(["ok"], tiny_scene))
    assert answers[0].error == "down: query 'q0': POST failed: connection refused"


# ---------------------------------------------------------------- the registry


def test_registry_resolves_names_commands_and_urls(faulty_script: Path) -> None:
    assert isinstance(load("oracle"), OraclePlayer)
    spec = f"subprocess:{sys.executable} {faulty_script}"
    with load(spec, timeout_s=1.0) as player:
        assert isinstance(player, SubprocessPlayer)
        assert player.command == [sys.executable, str(faulty_script)]
    assert load("http://127.0.0.1:9/x").needs == frozenset({"scene"})
    with pytest.raises(InputError, match=r"unknown player 'nobody' \(expected one of .*majority, .*oracle, "):
        load("nobody")
    with pytest.raises(InputError, match="no command after 'subprocess:'"):
        load("subprocess:  ")


def test_registry_registers_factories_by_name() -> None:
    class Constant(Player):
        name = "constant"

        def answer_batch(self, queries: Any) -> list[Answer]:
            return [Answer(q.item_id, "yes") for q in queries]

    register("test-constant", Constant, replace=True)
    assert isinstance(load("test-constant"), Constant)
    with pytest.raises(ValueError, match="'test-constant' is already registered"):
        register("test-constant", Constant)
    with pytest.raises(ValueError, match="must be non-empty and contain no ':'"):
        register("a:b", Constant)
