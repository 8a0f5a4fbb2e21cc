"""Black-box adapters and `poc solve` against hostile or sloppy counterparts.

Real servers on 127.0.0.1 (and 127.0.0.2, another host as far as HTTP is
concerned), real player scripts, real clingo. Assertions are on behaviour and
counters, never on how fast this machine happens to be.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from clevr_game.asp import Environment
from clevr_game.asp.solve import brave_answers
from clevr_game.cli import main
from clevr_game.errors import InputError
from clevr_game.scene import Scene, SceneObject
from clevr_game.vocab import CLEVR_POC
from players import HttpPlayer, Query, SubprocessPlayer
from players import http_player as http_player_module

GENEROUS_S = 30.0  # for answers that must arrive: never reached by a healthy player
SECRET = "Bearer do-not-forward"


# ---------------------------------------------------------------- HTTP servers


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.server.record(self)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.behave(self, body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.record(self)
        self.server.behave(self, b"")


class _Server(ThreadingHTTPServer):
    """Records each request (method, path, headers) and answers as `behaviour` says."""

    daemon_threads = True

    def __init__(self, host: str) -> None:
        super().__init__((host, 0), _Handler)
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.bodies: list[bytes] = []
        self.behaviour = "answer"
        self.location = ""
        self.answer_path: str | None = None  # where a redirecting server answers after all
        self.trickle_bytes = 0
        self.bytes_sent = 0
        self.finished = threading.Event()
        self.stopped_by_client = False

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def record(self, handler: _Handler) -> None:
        self.requests.append((handler.command, handler.path, dict(handler.headers.items())))

    def behave(self, handler: _Handler, body: bytes) -> None:
        self.bodies.append(body)
        try:
            if self.behaviour.startswith("redirect") and handler.path != self.answer_path:
                handler.send_response(int(self.behaviour.removeprefix("redirect")))
                handler.send_header("Location", self.location)
                handler.send_header("Content-Length", "0")
                handler.end_headers()
            elif self.behaviour == "trickle-body":
                handler.send_response(200)
                handler.send_header("Content-Length", str(self.trickle_bytes))
                handler.end_headers()
                handler.wfile.flush()
                self._trickle(handler, b" " * self.trickle_bytes)
            elif self.behaviour == "trickle-headers":
                self._trickle(handler, b"HTTP/1.1 200 OK\r\nX-Padding: " + b"x" * self.trickle_bytes)
            elif self.behaviour == "huge":
                self._reply(handler, json.dumps({"answers": ["yes"], "pad": "x" * 5000}).encode())
            else:
                queries = json.loads(body)["queries"]
                self._reply(handler, json.dumps({"answers": [{"id": q["id"], "answer": "yes"} for q in queries]}).encode())
        finally:
            self.finished.set()

    def _trickle(self, handler: _Handler, payload: bytes) -> None:
        try:
            for k in range(len(payload)):
                handler.wfile.write(payload[k : k + 1])
                handler.wfile.flush()
                self.bytes_sent += 1
                time.sleep(0.3)
        except (BrokenPipeError, ConnectionResetError):
            self.stopped_by_client = True

    @staticmethod
    def _reply(handler: _Handler, payload: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


def _serve(host: str) -> Iterator[_Server]:
    server = _Server(host)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5.0)


@pytest.fixture()
def server() -> Iterator[_Server]:
    yield from _serve("127.0.0.1")


@pytest.fixture()
def other_host() -> Iterator[_Server]:
    yield from _serve("127.0.0.2")


def _queries(count: int = 1) -> list[Query]:
    scene = Scene([SceneObject("large", "red", "metal", "cube", (0.0, 0.0, 0.7))])
    return [Query(f"q{i}", "Is there a cube?", scene) for i in range(count)]


# ---------------------------------------------------------------- HTTP: redirects


@pytest.mark.parametrize(
    ("status", "target"),
    [
        (302, "other-host"),  # the reported case: a GET to another host with the credentials
        (307, "other-host"),  # keeps the body, but another host must not see it either
        (308, "other-port"),
        (303, "same-origin"),  # would turn the POST into a GET without body
        (301, "same-origin"),
    ],
)
def test_http_player_follows_no_redirect_that_changes_origin_or_method(
    server: _Server, other_host: _Server, status: int, target: str
) -> None:
    location = {
        "other-host": f"{other_host.url}/steal",
        "other-port": f"http://127.0.0.1:{other_host.server_address[1]}/steal",
        "same-origin": f"{server.url}/elsewhere",
    }[target]
    server.behaviour, server.location = f"redirect{status}", location
    player = HttpPlayer(f"{server.url}/answer", timeout_s=GENEROUS_S, headers={"Authorization": SECRET}, name="remote")
    answers = player.answer_batch(_queries(2))
    expected = (
        f"POST redirected with HTTP {status} to '{location}': not followed "
        "(only 307/308 to the same scheme, host and port are)"
    )
    assert [a.error for a in answers] == [f"remote: query 'q{i}': {expected}" for i in range(2)]
    assert other_host.requests == []
    assert [(method, path) for method, path, _ in server.requests] == [("POST", "/answer")]


def test_http_player_follows_307_on_the_same_origin_with_body_and_headers(server: _Server) -> None:
    server.behaviour, server.location = "redirect307", "/answer/"
    server.answer_path = "/answer/"
    player = HttpPlayer(f"{server.url}/answer", timeout_s=GENEROUS_S, headers={"Authorization": SECRET})
    answers = player.answer_batch(_queries(2))
    assert [a.text for a in answers] == ["yes", "yes"]
    assert [(method, path) for method, path, _ in server.requests] == [("POST", "/answer"), ("POST", "/answer/")]
    assert server.bodies[0] == server.bodies[1] and json.loads(server.bodies[1])["queries"][1]["id"] == "q1"
    assert server.requests[1][2]["Authorization"] == SECRET


def test_http_player_stops_a_same_origin_redirect_loop(server: _Server) -> None:
    server.behaviour, server.location = "redirect308", "/answer"
    player = HttpPlayer(f"{server.url}/answer", timeout_s=GENEROUS_S)
    answers = player.answer_batch(_queries())
    assert answers[0].error == f"{player.name}: query 'q0': POST redirected more than 5 times"
    assert len(server.requests) == http_player_module.MAX_SAME_ORIGIN_REDIRECTS + 1


# ---------------------------------------------------------------- HTTP: the deadline


@pytest.mark.parametrize("behaviour", ["trickle-body", "trickle-headers"])
def test_http_player_timeout_is_a_deadline_for_the_whole_request(server: _Server, behaviour: str) -> None:
    # 100 bytes at one per 0.3 s would take 30 s; each read alone is quick, so only a
    # deadline over the whole request stops it.
    server.behaviour, server.trickle_bytes = behaviour, 100
    player = HttpPlayer(f"{server.url}/answer", timeout_s=1.0, name="slow")
    answers = player.answer_batch(_queries(2))
    assert [a.error for a in answers] == [f"slow: query 'q{i}': no complete response within 1 s" for i in range(2)]
    assert server.finished.wait(timeout=GENEROUS_S)
    assert server.stopped_by_client and server.bytes_sent < 100


def test_http_player_refuses_a_response_over_the_size_limit(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_player_module, "MAX_RESPONSE_BYTES", 1000)
    server.behaviour = "huge"
    answers = HttpPlayer(f"{server.url}/answer", timeout_s=GENEROUS_S, name="big").answer_batch(_queries())
    assert answers[0].error == "big: query 'q0': response longer than 1000 bytes"


# ---------------------------------------------------------------- subprocess: stray lines

# Prints what PREFIX says before its first answer, then answers "yes" to each query;
# a question "skip" is answered after the next one, "junk" gets a junk line instead.
SLOPPY_PLAYER = r'''
import json, sys
PREFIX = {prefix!r}
for line in PREFIX:
    print(line, flush=True)
held = None
for line in sys.stdin:
    query = json.loads(line)
    if query["question"] == "skip":
        held = query
        continue
    if query["question"] == "junk":
        print("DEBUG: looking at " + query["id"], flush=True)
        continue
    if query["question"] == "other-id":
        print(json.dumps({{"id": "not-in-batch", "answer": "no"}}), flush=True)
    print(json.dumps({{"id": query["id"], "answer": "yes"}}), flush=True)
    if held is not None:
        print(json.dumps({{"id": held["id"], "answer": "yes"}}), flush=True)
        held = None
'''


def _sloppy(tmp_path: Path, prefix: list[str], **options: Any) -> SubprocessPlayer:
    script = tmp_path / "sloppy_player.py"
    script.write_text(SLOPPY_PLAYER.format(prefix=prefix))
    settings = {"timeout_s": GENEROUS_S, "startup_timeout_s": GENEROUS_S, **options}
    return SubprocessPlayer([sys.executable, str(script)], **settings)


def _asked(*questions: str) -> list[Query]:
    return [Query(f"q{i}", text, vocabulary=CLEVR_POC) for i, text in enumerate(questions)]


def test_subprocess_player_skips_a_startup_banner(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    banner = ["model v1.2 loading...", json.dumps({"status": "ready"})]
    with caplog.at_level(logging.WARNING, logger="players.subprocess_player"), _sloppy(tmp_path, banner) as player:
        answers = player.answer_batch(_asked("a", "b", "c"))
        again = player.answer_batch(_asked("d"))
        assert player.protocol_warnings == 2 and player.restarts == 0
    assert [a.text for a in answers + again] == ["yes"] * 4
    warnings = [r.getMessage() for r in caplog.records if r.name == "players.subprocess_player"]
    assert len(warnings) == 1  # shown once, then only counted
    assert "skipped a stdout line that answers no awaited query: 'model v1.2 loading...'" in warnings[0]


def test_subprocess_player_resynchronises_after_a_line_with_an_unknown_id(tmp_path: Path) -> None:
    with _sloppy(tmp_path, []) as player:
        answers = player.answer_batch(_asked("a", "other-id", "b", "other-id", "c"))
        assert player.protocol_warnings == 2 and player.restarts == 0
    assert [a.text for a in answers] == ["yes"] * 5


def test_subprocess_player_fails_only_a_skipped_query(tmp_path: Path) -> None:
    with _sloppy(tmp_path, []) as player:
        answers = player.answer_batch(_asked("a", "skip", "b", "c"))
        # q1's answer, sent after q2's, is late: skipped as a stray line.
        assert player.protocol_warnings == 1 and player.restarts == 0
    assert answers[1].error == (
        f"{player.name}: query 'q1': no answer: the player answered 'q2' first (answers must come in query order)"
    )
    assert [a.text for a in answers] == ["yes", None, "yes", "yes"]


def test_subprocess_player_reports_a_junk_line_given_instead_of_an_answer(tmp_path: Path) -> None:
    with _sloppy(tmp_path, []) as player:
        followed = player.answer_batch(_asked("junk", "b"))  # the next answer shows q0 was skipped
        assert player.restarts == 0
        player.timeout_s = 0.5  # nothing follows the last junk line: only the timeout ends the wait
        last = player.answer_batch(_asked("junk"))
        assert player.restarts == 1 and player.protocol_warnings == 2
    assert followed[0].error == (
        f"{player.name}: query 'q0': no answer: the player answered 'q1' first (answers must come in query order)"
    )
    assert followed[1].text == "yes"
    assert last[0].error == (
        f"{player.name}: query 'q0': no answer within 0.5 s (hang; 1 stray line skipped, "
        "last 'DEBUG: looking at q0'); process killed"
    )


def test_subprocess_player_gives_up_on_a_player_that_prints_a_banner_then_dies(tmp_path: Path) -> None:
    # A banner is no answer: it must not reset the count of failures in a row.
    command = [sys.executable, "-c", "print('starting', flush=True); raise SystemExit(1)"]
    with SubprocessPlayer(command, max_restarts=1, timeout_s=GENEROUS_S, startup_timeout_s=GENEROUS_S) as player:
        answers = player.answer_batch(_asked("a", "b", "c"))
    assert answers[0].error == (
        f"{player.name}: query 'q0': process exited with code 1 before answering; 1 stray line skipped, last 'starting'"
    )
    assert answers[2].error is not None and "gave up after 2 failures in a row" in answers[2].error


# ---------------------------------------------------------------- poc solve

ENVIRONMENT = "object(0..2).\n% No two objects share a colour.\n:- hasProperty(X, color, C), hasProperty(Y, color, C), X != Y.\n"
QUESTION = "query(Q) :- hidden(X), hasProperty(X, color, Q).\n"
COLOURS_BUT_RED = ["blue", "brown", "cyan", "gray", "green", "purple", "yellow"]


@pytest.fixture()
def poc_files(tmp_path: Path) -> dict[str, Path]:
    scene = Scene(
        [SceneObject("large", "red", "metal", "cube", (-2.0, -2.0, 0.7), extra={"region": 0})], vocabulary=CLEVR_POC
    )
    files = {"environment": tmp_path / "env.lp", "scene": tmp_path / "partial.json", "question": tmp_path / "q.lp"}
    files["environment"].write_text(ENVIRONMENT)
    files["scene"].write_text(json.dumps(scene.to_json()))
    files["question"].write_text(QUESTION)
    return files


def _solve(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    capsys.readouterr()
    status = main(["poc", "solve", *(f"--{key}={path}" for key, path in files.items())])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def test_poc_solve_prints_the_brave_answers(poc_files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _solve(poc_files, capsys) == (0, COLOURS_BUT_RED, "")


def _secret_file(tmp_path: Path) -> Path:
    # Were it included, it would add the answer `red`.
    secret = tmp_path / "secret.lp"
    secret.write_text("query(red).\n")
    return secret


REACHING_OUT = [
    ('#include "{secret}".\n', "line 1: unsupported statement '#include'"),
    ("#include <incmode>.\n", "line 1: unsupported statement '#include'"),
    ('%* a block comment does not hide it: *% #include\n"{secret}".\n', "line 1: unsupported statement '#include'"),
    ("#script (python)\nimport os\n#end.\n", "line 1: unsupported statement '#script'"),
    ("#script (lua)\nos.exit(1)\n#end.\n", "line 1: unsupported statement '#script'"),
    ("#external query(red).\n", "line 1: unsupported statement '#external'"),
    ("p(X) :- X = @main().\n", "line 1: unsupported term '@main' (it calls a function outside the program)"),
]


@pytest.mark.parametrize(("snippet", "message"), REACHING_OUT)
def test_poc_solve_rejects_a_question_that_reaches_outside(
    poc_files: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path, snippet: str, message: str
) -> None:
    poc_files["question"].write_text(snippet.format(secret=_secret_file(tmp_path)) + QUESTION)
    status, out, err = _solve(poc_files, capsys)
    assert (status, out) == (2, [])
    assert err.startswith(f"clevr-game: error: {poc_files['question']}: {message}") and err.count("\n") == 1


@pytest.mark.parametrize(("snippet", "message"), REACHING_OUT)
def test_environments_that_reach_outside_are_rejected(tmp_path: Path, snippet: str, message: str) -> None:
    text = ENVIRONMENT + snippet.format(secret=_secret_file(tmp_path))
    line = ENVIRONMENT.count("\n") + 1
    with pytest.raises(InputError, match=message.replace("line 1", f"line {line}").replace("(", r"\(").replace(")", r"\)")):
        Environment.from_text(text, "env.lp")


def test_a_comment_line_may_name_a_directive(poc_files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    poc_files["question"].write_text("% no #include, #script or #external here\n" + QUESTION)
    assert _solve(poc_files, capsys)[:2] == (0, COLOURS_BUT_RED)


@pytest.mark.parametrize(
    "question",
    [
        "query(Q) :- Q = 1..2000000000.\n",
        QUESTION + "query(Q) :- hidden(X), Q = 1..2000000000.\n",
        QUESTION + "missing((A, B)) :- A = 1..50000, B = 1..50000.\n",
    ],
)
def test_poc_solve_refuses_answers_outside_the_vocabulary_without_enumerating_them(
    poc_files: dict[str, Path], capsys: pytest.CaptureFixture[str], question: str
) -> None:
    # Printed, these would be billions of lines; grounded, billions of atoms.
    poc_files["question"].write_text(question)
    status, out, err = _solve(poc_files, capsys)
    assert (status, out) == (2, [])
    assert err.startswith(f"clevr-game: error: {poc_files['question']}: line ") and err.count("\n") == 1
    assert "the query takes values outside the" in err


def test_poc_solve_checks_values_against_the_query_attribute(
    poc_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    poc_files["question"].write_text(QUESTION + "query(cube).\n")
    status, out, err = _solve(poc_files, capsys)
    assert (status, out) == (2, [])
    assert err == (
        f"clevr-game: error: {poc_files['question']}: line 2: the query takes values outside the color vocabulary "
        "(expected one of blue, brown, cyan, gray, green, purple, red, yellow)\n"
    )


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ("{ query(Q) : Q = 1..3 }.\n", "line 1: query(Q) and missing(Q) may only be the head of a plain rule"),
        ("query(Q) ; other :- hidden(X), hasProperty(X, color, Q).\n", "line 1: query(Q) and missing(Q) may only be"),
        ("#show hasProperty/3.\n" + QUESTION, "line 1: unsupported statement (a question holds rules only)"),
        ("clevr_game_answer_value(1..9).\n" + QUESTION, "line 1: predicate names starting with 'clevr_game_' are reserved"),
    ],
)
def test_poc_solve_rejects_questions_that_dodge_the_answer_guard(
    poc_files: dict[str, Path], capsys: pytest.CaptureFixture[str], question: str, message: str
) -> None:
    poc_files["question"].write_text(question)
    status, out, err = _solve(poc_files, capsys)
    assert (status, out) == (2, [])
    assert err.startswith(f"clevr-game: error: {poc_files['question']}: {message}")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("query(Q) :- Q = 1..5.\n", r"env\.lp: line 4: an environment may not define query/1"),
        ("#show query(5) : object(0).\n", r"env\.lp: a #show statement adds the answer '5', outside the color vocabulary"),
    ],
)
def test_environments_cannot_add_answers(extra: str, message: str) -> None:
    scene = Scene([SceneObject("large", "red", "metal", "cube", (0.0, 0.0, 0.7), extra={"region": 0})], vocabulary=CLEVR_POC)
    with pytest.raises(InputError, match=message):
        environment = Environment.from_text(ENVIRONMENT + extra, "env.lp")
        brave_answers(environment, scene, QUESTION, question_name="q.lp")
