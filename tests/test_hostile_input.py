"""Hostile input that would exhaust the machine or print a traceback: one line each, and a bounded cost.

Real player scripts written to tmp_path, a real HTTP server on 127.0.0.1, real
files. Each test names the finding it guards (issue 61).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from benchmarks.trials import Plan
from clevr_game.cli import build_parser, main
from clevr_game.errors import InputError
from clevr_game.layout import judge_scenes
from clevr_game.scene import MAX_JSON_DEPTH, load_scenes
from clevr_game.vocab import CLEVR
from envs.items import clevr_items, load_items
from players import HttpPlayer, Query, SubprocessPlayer
from players.guard import MAX_PLAYER_TIMEOUT_S, limits_from_args
from players.registry import load_guarded
from players.subprocess_player import MAX_LINE_BYTES

SAMPLE = Path(__file__).resolve().parents[1] / "clevr_game" / "data" / "sample"
GENEROUS_S = 30.0  # for answers that must arrive: never reached by a healthy player
DEEP = "[" * 100_000 + "]" * 100_000  # 200 KB: far past the parser's recursion limit
PARSEABLE_DEEP = "[" * 500 + "]" * 500  # parses, but kept it would break a later repr or dump


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _one_line_error(argv: list[str]) -> str:
    code, _, err = _run(argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("clevr-game: error: "), err
    return lines[0].removeprefix("clevr-game: error: ")


def _parser_error(argv: list[str]) -> str:
    # The parser alone: should a check ever go missing, no command runs with the value.
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(argv)
    assert stopped.value.code == 2
    return err.getvalue().strip().splitlines()[-1]


def _sample_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    shutil.copytree(SAMPLE, folder)
    return folder


def _edit_json(path: Path, change: Any) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def _asked(*questions: str) -> list[Query]:
    return [Query(f"q{i}", text, vocabulary=CLEVR) for i, text in enumerate(questions)]


# A player whose reply to each question is given by the question: `deep` (a nest past the parser),
# `deep-answer` (a parseable nest as the answer), `flood` (an endless line), `chatter` (many stray
# lines, then the answer), `silent` (never answers), anything else: "yes".
PLAYER = '''
import json, sys, time
PARSEABLE = {parseable!r}
for line in sys.stdin:
    query = json.loads(line)
    question = query["question"]
    if question == "deep":
        sys.stdout.write("[" * 100000 + "]" * 100000 + "\\n")
    elif question == "deep-answer":
        sys.stdout.write('{{"id": "%s", "answer": %s}}\\n' % (query["id"], PARSEABLE))
    elif question == "flood":
        block = b"x" * (1 << 20)
        for _ in range({flood_mib}):
            sys.stdout.buffer.write(block)
        sys.stdout.flush()
        time.sleep(3600)
    elif question == "chatter":
        for k in range(3000):
            sys.stdout.write("debug %d\\n" % k)
        sys.stdout.write(json.dumps({{"id": query["id"], "answer": "yes"}}) + "\\n")
    elif question == "silent":
        time.sleep(3600)
    else:
        sys.stdout.write(json.dumps({{"id": query["id"], "answer": "yes"}}) + "\\n")
    sys.stdout.flush()
'''


def _player_script(tmp_path: Path) -> Path:
    script = tmp_path / "hostile_player.py"
    script.write_text(PLAYER.format(parseable=PARSEABLE_DEEP, flood_mib=MAX_LINE_BYTES // (1 << 20) + 2))
    return script


def _player(tmp_path: Path, **options: Any) -> SubprocessPlayer:
    settings = {"timeout_s": GENEROUS_S, "startup_timeout_s": GENEROUS_S, "max_restarts": 1, **options}
    return SubprocessPlayer([sys.executable, str(_player_script(tmp_path))], **settings)


# ---------------------------------------------------------------- 1. deeply nested JSON


@pytest.mark.parametrize("question", ["deep", "deep-answer"])
def test_a_subprocess_player_answering_a_deep_nest_gets_an_error_answer(tmp_path, question):
    with _player(tmp_path) as player:
        answers = player.answer_batch(_asked("a", question, "b"))
        assert player.restarts == 0  # garbage, not a hang: the process keeps its place
    assert answers[1].error == (f"{player.name}: query 'q1': answer nests JSON arrays or objects "
                                f"more than {MAX_JSON_DEPTH} levels deep")
    assert [a.text for a in answers] == ["yes", None, "yes"]


@pytest.mark.parametrize("body", [DEEP, '{"answers": [{"id": "q0", "answer": ' + PARSEABLE_DEEP + "}]}"],
                         ids=["past-the-parser", "parseable"])
def test_an_http_player_answering_a_deep_nest_fails_its_request_in_one_line(body):
    with _server(lambda handler, _: _reply(handler, body.encode())) as url, HttpPlayer(url) as player:
        answers = player.answer_batch(_asked("a"))
    assert answers[0].error == (f"{url}: query 'q0': response nests JSON arrays or objects "
                                f"more than {MAX_JSON_DEPTH} levels deep")


@pytest.mark.parametrize("name", ["scenes.json", "questions.json"])
def test_a_deep_nest_in_an_input_file_is_an_input_error_naming_the_file(tmp_path, name):
    folder = _sample_copy(tmp_path)
    text = (folder / name).read_text()
    (folder / name).write_text(text[: text.rindex("}")] + f', "padding": {DEEP}}}')
    scenes, questions = str(folder / "scenes.json"), str(folder / "questions.json")
    expected = f"{folder / name}: JSON nested too deeply to read"
    assert _one_line_error(["answer", "--scenes", scenes, "--questions", questions]).startswith(expected)
    assert _one_line_error(["play", "--items", str(folder), "--episodes", "2"]).startswith(expected)


def test_a_deep_items_json_is_an_input_error_naming_it(tmp_path):
    (tmp_path / "items.json").write_text(DEEP)
    with pytest.raises(InputError, match=r"items\.json: JSON nested too deeply to read"):
        load_items(tmp_path)


def test_a_kept_scene_field_nested_deeply_is_refused_and_bad_values_are_shown_short(tmp_path):
    folder = _sample_copy(tmp_path)
    text = (folder / "scenes.json").read_text()
    # An unknown field is kept for the round trip: a nest that parses must not be kept.
    (folder / "scenes.json").write_text(text.replace('"material"', f'"mask": {PARSEABLE_DEEP}, "material"', 1))
    with pytest.raises(InputError, match=(r"^scenes\.json: scene 0, object 0: field 'mask' nests lists or dicts "
                                          rf"more than {MAX_JSON_DEPTH} levels deep$")):
        load_scenes(folder / "scenes.json")
    (folder / "scenes.json").write_text(text.replace('"3d_coords": [', f'"3d_coords": [{PARSEABLE_DEEP}, ', 1))
    with pytest.raises(InputError) as refused:
        load_scenes(folder / "scenes.json")
    assert len(str(refused.value)) < 200 and "3d_coords must be a list of 3 numbers" in str(refused.value)


# ---------------------------------------------------------------- 2. compressed responses


@pytest.mark.parametrize("layers", [1, 2])
def test_an_http_player_refuses_a_compressed_response_it_did_not_ask_for(layers):
    # Two layers of gzip unpack a few kilobytes to gigabytes; a modest 4 MB keeps this test light.
    inner = json.dumps({"answers": [{"id": "q0", "answer": "yes"}], "pad": " " * 4_000_000}).encode()
    body = inner
    for _ in range(layers):
        body = gzip.compress(body)
    encoding = ", ".join(["gzip"] * layers)
    asked: list[str] = []

    def behave(handler: BaseHTTPRequestHandler, _: bytes) -> None:
        asked.append(handler.headers.get("Accept-Encoding", ""))
        _reply(handler, body, {"Content-Encoding": encoding})

    with _server(behave) as url, HttpPlayer(url) as player:
        answers = player.answer_batch(_asked("a"))
    assert len(body) < 20_000 and asked == ["identity"]
    assert answers[0].error == (f"{url}: query 'q0': response in content encoding '{encoding}', not asked for "
                                "(the request accepts identity only)")


# ---------------------------------------------------------------- 3. an endless stdout line


def test_a_subprocess_player_flooding_one_line_fails_at_the_line_cap_not_the_timeout(tmp_path):
    with _player(tmp_path) as player:
        started = time.monotonic()
        answers = player.answer_batch(_asked("flood", "a"))
        elapsed = time.monotonic() - started
        assert player.restarts == 1  # the stream is cut mid-line: the process cannot be trusted again
    assert answers[0].error == (f"{player.name}: query 'q0': a stdout line longer than {MAX_LINE_BYTES} bytes "
                                "(an answer is one short JSON line); process killed")
    assert answers[1].text == "yes"
    assert elapsed < GENEROUS_S


def test_many_stray_lines_before_an_answer_pass_through_the_bounded_buffer(tmp_path):
    with _player(tmp_path) as player:
        answers = player.answer_batch(_asked("chatter", "a", "chatter"))
        assert player.protocol_warnings == 6000 and player.restarts == 0
    assert [a.text for a in answers] == ["yes"] * 3


def test_an_endless_stderr_line_is_kept_short(tmp_path):
    script = tmp_path / "shouting.py"
    script.write_text("import sys\nsys.stderr.write('E' * 20_000_000)\nsys.stderr.flush()\nsys.exit(3)\n")
    with SubprocessPlayer([sys.executable, str(script)], max_restarts=0, timeout_s=GENEROUS_S) as player:
        answers = player.answer_batch(_asked("a"))
    assert answers[0].error.startswith(f"{player.name}: query 'q0': process exited with code 3 before answering "
                                       "(last stderr: EEEE")
    assert len(answers[0].error) <= 200


# ---------------------------------------------------------------- 4. the start-up wait


def test_the_start_up_wait_is_its_own_and_named(tmp_path):
    with _player(tmp_path, timeout_s=0.5, startup_timeout_s=1.0, max_restarts=0) as player:
        started = time.monotonic()
        answers = player.answer_batch(_asked("silent"))
        assert time.monotonic() - started < 10
    assert answers[0].error == (f"{player.name}: query 'q0': no answer within 1 s "
                                "(start-up wait of a fresh process; hang); process killed")
    with _player(tmp_path, timeout_s=0.5, startup_timeout_s=GENEROUS_S) as player:
        answers = player.answer_batch(_asked("a", "silent"))
    assert answers[1].error == f"{player.name}: query 'q1': no answer within 0.5 s (hang); process killed"


def test_the_start_up_wait_is_never_shorter_than_the_answer_wait(tmp_path):
    with _player(tmp_path, timeout_s=1.0, startup_timeout_s=0.0, max_restarts=0) as player:
        answers = player.answer_batch(_asked("silent"))
    assert "no answer within 1 s (start-up wait" in answers[0].error


def test_an_http_player_gives_its_first_request_the_start_up_wait():
    requests: list[float] = []

    def slow_first(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        requests.append(time.monotonic())
        if len(requests) == 1 or json.loads(body)["queries"][0]["question"] == "slow":
            time.sleep(1.5)
        queries = json.loads(body)["queries"]
        _reply(handler, json.dumps({"answers": [{"id": q["id"], "answer": "yes"} for q in queries]}).encode())

    with _server(slow_first) as url:
        with HttpPlayer(url, timeout_s=0.5, startup_timeout_s=GENEROUS_S) as player:
            first = player.answer_batch(_asked("a"))
            later = player.answer_batch(_asked("slow"))
        with HttpPlayer(url, timeout_s=0.5, startup_timeout_s=1.0) as player:
            requests.clear()
            never = player.answer_batch(_asked("a"))
    assert first[0].text == "yes"
    assert later[0].error == f"{url}: query 'q0': no complete response within 0.5 s"
    assert never[0].error == f"{url}: query 'q0': no complete response within 1 s (start-up wait: no request answered yet)"


def test_a_never_answering_player_costs_the_start_up_wait_given_on_the_command_line(tmp_path):
    spec = f"subprocess:{sys.executable} {_player_script(tmp_path)}"
    folder = _sample_copy(tmp_path)
    silent = folder / "questions.json"
    _edit_json(silent, lambda d: [q.update(question="silent") for q in d["questions"]])
    started = time.monotonic()
    code, out, _ = _run(["play", "--items", str(folder), "--player", spec, "--episodes", "4", "--batch", "4",
                         "--player-timeout", "0.5", "--player-startup-timeout", "1", "--max-player-failures", "0"])
    assert time.monotonic() - started < 20  # one start-up wait per process tried, not 30 s each
    assert code == 1 and "no answer within 1 s (start-up wait of a fresh process; hang)" in out


@pytest.mark.parametrize("command", [["play"], ["attack"], ["benchmark"], ["players", "eval"]])
@pytest.mark.parametrize("option", ["--player-timeout", "--player-startup-timeout"])
def test_player_time_limits_are_bounded_when_parsed(command, option):
    assert _parser_error([*command, option, "1e10"]).endswith(
        f"error: argument {option}: must be at most {MAX_PLAYER_TIMEOUT_S:g} seconds, got '1e10'")
    assert _parser_error([*command, option, "0"]).endswith(f"error: argument {option}: must be a positive number, got '0'")


@pytest.mark.parametrize("command", [["play", "--items", "x"], ["attack", "--player", "oracle", "--items", "x",
                                                                 "--out", "o"], ["benchmark"],
                                     ["players", "eval", "--player", "oracle", "--data", "x"]])
def test_the_start_up_wait_reaches_every_command_that_guards_a_player(command, tmp_path):
    args = build_parser().parse_args([*command, "--player-startup-timeout", "7", "--player-timeout", "2"])
    limits = limits_from_args(args)
    assert limits["startup_timeout_s"] == 7.0 and limits["timeout_s"] == 2.0
    guarded = load_guarded(f"subprocess:{sys.executable} {_player_script(tmp_path)}", **limits)
    with guarded:
        assert (guarded.player.startup_timeout_s, guarded.player.timeout_s) == (7.0, 2.0)
        assert guarded.answer_batch(_asked("a"))[0].text == "yes"
    plan = Plan(players=["oracle"], items="x", sizes=[1], minigames=1, seeds=1, steps=1, out=str(tmp_path),
                player_startup_timeout=7.0)
    assert plan.trials()[0]["player_startup_timeout"] == 7.0


# ---------------------------------------------------------------- 5. an empty player file


@pytest.mark.parametrize("command", [["play", "--items", str(SAMPLE), "--episodes", "2"],
                                     ["players", "eval", "--data", str(SAMPLE), "--no-progress"]])
def test_an_empty_player_file_is_an_input_error_naming_it(tmp_path, command):
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    assert _one_line_error([*command, "--player", f"file:{empty}"]) == f"{empty}: empty player file (0 bytes)"


# ---------------------------------------------------------------- 6 and 7: CLEVR-POC items


@pytest.fixture(scope="module")
def poc_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clevr_game.asp.dataset import generate_poc_dataset

    folder = tmp_path_factory.mktemp("poc")
    generate_poc_dataset(folder, 2, 4, seed=5)
    return folder


def _poc_copy(poc_folder: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "poc"
    shutil.copytree(poc_folder, folder)
    return folder


@pytest.mark.parametrize("environment", ["../../../outside", "/tmp/outside", "..", ".hidden", "a/b"])
def test_a_poc_environment_never_names_a_file_outside_the_dataset(poc_folder, tmp_path, environment):
    folder = _poc_copy(poc_folder, tmp_path / "deep" / "er")
    (tmp_path / "outside.lp").write_text("% not part of the dataset\n")
    _edit_json(folder / "items.json", lambda d: d["items"][1].update(environment=environment))
    with pytest.raises(InputError, match=r"^items\.json: item 1: field 'environment' .* is not a plain environment name"):
        load_items(folder)


def test_a_poc_answer_of_the_wrong_kind_is_an_input_error(poc_folder, tmp_path):
    folder = _poc_copy(poc_folder, tmp_path)
    _edit_json(folder / "items.json", lambda d: d["items"][2].update(answer=["banana"]))
    with pytest.raises(InputError, match=r"^items\.json: item 2: field 'answer' is \['banana'\], but query_\w+ "
                                         r"answers one of "):
        load_items(folder)


def test_generated_poc_items_keep_the_placement_rules(poc_folder):
    items = load_items(poc_folder)
    assert items and judge_scenes([item.scene for item in items]) == [None] * len(items)


# ---------------------------------------------------------------- 7. scenes and answers that cannot be


def _first_question(folder: Path, function: str) -> tuple[int, int]:
    """(position, image_index) of the first question whose program ends in `function`."""
    questions = json.loads((folder / "questions.json").read_text())["questions"]
    return next((i, q["image_index"]) for i, q in enumerate(questions) if q["program"][-1]["function"] == function)


def test_two_objects_at_one_spot_are_refused_as_items_and_counted_by_answer(tmp_path):
    folder = _sample_copy(tmp_path)
    _, image_index = _first_question(folder, "count")

    def stack(document: dict) -> None:
        objects = document["scenes"][image_index]["objects"]
        objects[1]["3d_coords"] = list(objects[0]["3d_coords"])

    _edit_json(folder / "scenes.json", stack)
    assert _one_line_error(["play", "--items", str(folder), "--episodes", "2"]) == (
        f"scenes.json: scene {image_index}: object 0 overlaps object 1 (CLEVR's placement rules; "
        "a game item must keep them)")
    code, out, err = _run(["answer", "--scenes", str(folder / "scenes.json"),
                           "--questions", str(folder / "questions.json")])
    assert code == 0 and out.strip().splitlines()[-1].startswith("accuracy: ")
    assert err.strip() == (f"clevr-game: warning: scenes.json: 1 of 20 scenes break CLEVR's placement rules "
                           f"(first: scene {image_index}: object 0 overlaps object 1); answered as they are")


def test_a_scene_leaving_the_board_is_refused_as_an_item(tmp_path):
    folder = _sample_copy(tmp_path)
    _edit_json(folder / "scenes.json", lambda d: d["scenes"][0]["objects"][2]["3d_coords"].__setitem__(0, 5.0))
    with pytest.raises(InputError, match=r"^scenes\.json: scene 0: object 2 leaves the board \(-3, 3\)"):
        load_items(folder)


@pytest.mark.parametrize("value", [1e308, -1e4])
def test_an_absurd_coordinate_is_an_input_error_wherever_scenes_are_read(tmp_path, value):
    folder = _sample_copy(tmp_path)
    _edit_json(folder / "scenes.json", lambda d: d["scenes"][3]["objects"][1]["3d_coords"].__setitem__(1, value))
    message = _one_line_error(["answer", "--scenes", str(folder / "scenes.json"),
                               "--questions", str(folder / "questions.json")])
    assert message.startswith("scenes.json: scene 3, object 1: 3d_coords [")
    assert message.endswith("lie outside any CLEVR world (each coordinate must be within +-1000; the board is (-3, 3))")
    assert _one_line_error(["play", "--items", str(folder), "--episodes", "2"]) == message


@pytest.mark.parametrize(("function", "answer", "why"), [
    ("count", "banana", "count answers a whole number from 0 to {n} (the scene's objects)"),
    ("count", "-1", "count answers a whole number from 0 to {n} (the scene's objects)"),
    ("count", "11", "count answers a whole number from 0 to {n} (the scene's objects)"),
    ("exist", "maybe", "exist answers 'yes' or 'no'"),
    ("query_color", "octarine", "query_color answers one of gray, red, blue, green, brown, purple, cyan, yellow"),
])
def test_a_stored_answer_of_the_wrong_kind_is_an_input_error_naming_the_question(tmp_path, function, answer, why):
    folder = _sample_copy(tmp_path)
    try:
        position, image_index = _first_question(folder, function)
    except StopIteration:
        pytest.skip(f"the shipped sample asks no {function} question")
    _edit_json(folder / "questions.json", lambda d: d["questions"][position].update(answer=answer))
    count = len(json.loads((folder / "scenes.json").read_text())["scenes"][image_index]["objects"])
    with pytest.raises(InputError) as refused:
        load_items(folder)
    assert str(refused.value) == (f"questions.json: question {position}: field 'answer' is {answer!r}, "
                                  f"but {why.format(n=count)}")


def test_the_shipped_sample_and_the_real_clevr_files_keep_every_rule(clevr_real):
    # Real CLEVR keeps bounds, gaps and the 0.4 margins along its own (jittered) axes;
    # visibility needs a render and is judged by the game, not when items load.
    for name in ("CLEVR_val_scenes_500.json", "CLEVR_train_scenes_1000.json", "CLEVR_val_scenes_sample11.json"):
        scenes = load_scenes(clevr_real / name)
        assert judge_scenes(scenes) == [None] * len(scenes), name
    assert len(clevr_items(clevr_real / "CLEVR_val_scenes_sample11.json",
                           clevr_real / "CLEVR_val_questions_sample9.json")) == 9
    assert len(load_items(SAMPLE)) == 60


# ---------------------------------------------------------------- a local HTTP server


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up first
            self.server.behave(self, body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, behave: Any) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behave = behave


@contextlib.contextmanager
def _server(behave: Any) -> Iterator[str]:
    server = _Server(behave)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()


def _reply(handler: BaseHTTPRequestHandler, payload: bytes, headers: dict[str, str] | None = None) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)

