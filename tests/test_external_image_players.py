"""A model the user brings sees images from the command line (issue 64): --needs, --image-size,
--render-preset, --send-image.

The external players are real: a JSON-lines script that wraps the shipped neuro-symbolic
player and reads only the PNG at each query's `image` path, and an http.server on
127.0.0.1 that reads only the PNG inline in the query (`image_png_base64`). The images
are real Blender renders (the `fast` preset at a small size), in this module's own cache.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import struct
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image, ImageStat

from benchmarks.trials import Plan, prepare_minigames, run_trial, same_trial
from clevr_game.cli import main
from clevr_game.datafiles import SAMPLE_DIR
from envs.items import load_items
from players import http_player
from players.protocol import IMAGE_INLINE_FIELD, ImageSpec, Query
from players.registry import load

pytestmark = pytest.mark.usefixtures("own_render_cache")

SAMPLE = SAMPLE_DIR
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NEURO_SYMBOLIC_SIZE = (128, 96)  # the shipped neuro-symbolic player's image_spec: fast, 128 x 96

# Answers from the PNG alone: a query that carries the scene, or an image of another size, is refused.
IMAGE_PLAYER = r'''
import json, struct, sys

from players.protocol import Query
from players.registry import load

width, height = int(sys.argv[1]), int(sys.argv[2])
model = load("neuro-symbolic")
for line in sys.stdin:
    query = json.loads(line)
    reply = {"id": query["id"]}
    if "scene" in query or "image" not in query:
        reply["error"] = "wanted the image alone, got " + ",".join(sorted(query))
    else:
        with open(query["image"], "rb") as handle:
            head = handle.read(24)
        size = struct.unpack(">II", head[16:24])
        if head[:8] != b"\x89PNG\r\n\x1a\n" or size != (width, height):
            reply["error"] = f"not a {width}x{height} PNG: {size}"
        else:
            answer = model.answer(Query(query["id"], query["question"], image_path=query["image"]))
            reply.update({"answer": answer.text} if answer.ok else {"error": answer.error})
    print(json.dumps(reply), flush=True)
'''


def _png_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG's header; None for anything else."""
    if not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as stopped:
            status = int(stopped.code or 0)
    return status, out.getvalue(), err.getvalue()


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


# ---------------------------------------------------------------- a subprocess player that reads the image path


@pytest.fixture(scope="module")
def image_player(tmp_path_factory: pytest.TempPathFactory) -> str:
    script = tmp_path_factory.mktemp("players") / "image_player.py"
    script.write_text(IMAGE_PLAYER)
    width, height = NEURO_SYMBOLIC_SIZE
    return f"subprocess:{sys.executable} {script} {width} {height}"


def test_a_subprocess_image_model_plays_from_the_command_line_like_the_same_model_in_process(
    image_player: str,
) -> None:
    # 5 to 7 s: 12 originals and their moved scenes rendered at 128 x 96, the model loaded twice
    assert load("neuro-symbolic").image_spec == ImageSpec("fast", *NEURO_SYMBOLIC_SIZE)
    common = ["play", "--items", str(SAMPLE), "--episodes", "12", "--batch", "12", "--seed", "3"]
    width, height = NEURO_SYMBOLIC_SIZE
    status, out, err = _run([*common, "--player", image_player, "--needs", "image",
                             "--image-size", f"{width}x{height}", "--render-preset", "fast"])
    assert status == 0, err
    assert "player errors" not in out, out
    external = _last_line(out)
    assert external.startswith("consistency: ") and " accuracy: " in external, external
    status, out, err = _run([*common, "--player", "neuro-symbolic"])
    assert status == 0, err
    # The same renders, the same model: every figure agrees, the clean accuracy too.
    assert external == _last_line(out)
    assert float(external.rsplit(" ", 1)[1]) > 0.5, external


# ---------------------------------------------------------------- an HTTP player that reads the image inline


class _InlineImageHandler(BaseHTTPRequestHandler):
    """Answers by each image's mean brightness; refuses a request with an image path or without an inline PNG
    of the size it was told."""

    server: _InlineImageServer

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        queries = json.loads(body)["queries"]
        answers = []
        for query in queries:
            data = base64.b64decode(query.get(IMAGE_INLINE_FIELD, ""), validate=True)
            if "image" in query or "scene" in query or _png_size(data) != self.server.size:
                self.server.refused += 1
                self._reply(400, b"{}")
                return
            brightness = ImageStat.Stat(Image.open(io.BytesIO(data)).convert("L")).mean[0]
            answers.append({"id": query["id"], "answer": "yes" if brightness > 100 else "no"})
        self.server.requests.append(len(queries))
        self._reply(200, json.dumps({"answers": answers}).encode())

    def _reply(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass  # the test reads the server's counts, not its log


class _InlineImageServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, size: tuple[int, int]) -> None:
        super().__init__(("127.0.0.1", 0), _InlineImageHandler)  # loopback only
        self.size = size
        self.refused = 0
        self.requests: list[int] = []


@pytest.fixture
def inline_server() -> Iterator[_InlineImageServer]:
    server = _InlineImageServer((64, 48))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server: _InlineImageServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/answer"


def test_an_http_model_on_another_machine_gets_each_image_inline_at_the_size_asked(
    inline_server: _InlineImageServer,
) -> None:
    # about 1 s: 6 originals and their moved scenes rendered at 64 x 48
    status, out, err = _run(["play", "--items", str(SAMPLE), "--episodes", "6", "--batch", "6",
                             "--player", _url(inline_server), "--needs", "image", "--image-size", "64x48",
                             "--send-image", "inline"])
    assert status == 0, err
    assert "player errors" not in out, out
    assert _last_line(out).startswith("consistency: ") and " accuracy: " in _last_line(out)
    assert inline_server.refused == 0 and sum(inline_server.requests) >= 6


def test_players_eval_measures_an_http_image_model_on_images_of_its_size(
    inline_server: _InlineImageServer, tmp_path: Path,
) -> None:
    # under 1 s: 2 scenes rendered at 64 x 48 (into a copy of the sample: eval keeps its images beside the data)
    data = tmp_path / "sample"
    data.mkdir()
    for name in ("scenes.json", "questions.json"):
        (data / name).write_bytes((SAMPLE / name).read_bytes())
    status, out, err = _run(["players", "eval", "--data", str(data), "--limit", "6", "--no-progress",
                             "--player", _url(inline_server), "--needs", "image", "--image-size", "64x48",
                             "--send-image", "inline"])
    assert status == 0, err
    assert _last_line(out).startswith("accuracy: ")
    assert inline_server.refused == 0 and sum(inline_server.requests) == 6


def _png(tmp_path: Path, size: tuple[int, int], name: str = "image.png") -> Path:
    path = tmp_path / name
    Image.new("RGB", size, (200, 200, 200)).save(path)
    return path


def test_the_same_server_refuses_an_image_sent_by_path(inline_server: _InlineImageServer, tmp_path: Path) -> None:
    query = Query("q0", "Is there a cube?", image_path=str(_png(tmp_path, (64, 48))))
    spec = ImageSpec("fast", 64, 48)
    with load(_url(inline_server), needs={"image"}, image_spec=spec) as by_path:
        assert "HTTP 400" in by_path.answer(query).error
    with load(_url(inline_server), needs={"image"}, image_spec=spec, send_image="inline") as inline:
        assert inline.answer(query).text == "yes"


def test_inline_images_are_split_over_requests_that_fit_the_body_cap_and_a_bad_file_fails_alone(
    inline_server: _InlineImageServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    image = _png(tmp_path, (64, 48))
    queries = [Query(f"q{i}", "Is there a cube?", image_path=str(image)) for i in range(5)]
    one_query = len(json.dumps({"id": "q0", "question": "Is there a cube?",
                                IMAGE_INLINE_FIELD: base64.b64encode(image.read_bytes()).decode()}))
    monkeypatch.setattr(http_player, "MAX_REQUEST_BYTES", 2 * one_query + 40)  # two queries a request
    missing = Query("q5", "Is there a cube?", image_path=str(tmp_path / "missing.png"))
    not_png = Query("q6", "Is there a cube?", image_path=str(tmp_path / "scenes.json"))
    (tmp_path / "scenes.json").write_text("{}")
    with load(_url(inline_server), needs={"image"}, image_spec=ImageSpec("fast", 64, 48),
              send_image="inline") as player:
        answers = player.answer_batch([queries[0], missing, *queries[1:], not_png])
    assert [a.text for a in answers] == ["yes", None, "yes", "yes", "yes", "yes", None]
    assert "cannot read the image" in answers[1].error and "No such file" in answers[1].error
    assert "is not a PNG" in answers[6].error
    assert inline_server.requests == [2, 2, 1]


# ---------------------------------------------------------------- the options, refused in one line


@pytest.mark.parametrize(("argv", "wanted"), [
    (["play", "--items", str(SAMPLE), "--player", "oracle", "--needs", "image"], "--needs: only for an external"),
    (["play", "--items", str(SAMPLE), "--player", "neuro-symbolic", "--needs", "image", "--image-size", "64x48"],
     "--needs: only for an external"),
    (["players", "eval", "--data", str(SAMPLE), "--player", "oracle", "--needs", "scene"],
     "--needs: only for an external"),
    (["attack", "--items", str(SAMPLE), "--player", "majority", "--needs", "image"], "--needs: only for an external"),
    (["benchmark", "--players", "oracle,state-rn", "--needs", "image"], "none of the players is one"),
    (["benchmark", "--players", "oracle", "--player", "subprocess:x", "--needs", "image", "--send-image", "inline"],
     "--send-image inline: only for http(s):// players"),
    (["play", "--items", str(SAMPLE), "--player", "subprocess:x", "--needs", "image", "--send-image", "inline"],
     "--send-image inline: only for an http(s):// player"),
    (["play", "--items", str(SAMPLE), "--player", "subprocess:x", "--image-size", "64x48"],
     "--image-size: only for a player that is sent images"),
    (["play", "--items", str(SAMPLE), "--player", "subprocess:x", "--needs", "image", "--image-size", "48x64"],
     "--image-size 48x64: image height 64 exceeds width 48"),
])
def test_the_input_options_are_refused_in_one_line_where_they_do_not_apply(
    argv: list[str], wanted: str, tmp_path: Path,
) -> None:
    if argv[0] in ("attack", "benchmark"):
        argv = [*argv, "--out", str(tmp_path / "out")]
    status, out, err = _run(argv)
    assert status == 2, err
    assert err.strip().count("\n") == 0 and wanted in err, err


def test_an_unknown_need_stops_the_parser() -> None:
    status, _, err = _run(["play", "--items", str(SAMPLE), "--player", "subprocess:x", "--needs", "image,pixels"])
    assert status == 2 and "argument --needs: must be a comma-separated list of image, program, scene" in err


# ---------------------------------------------------------------- the attack's run folder and the benchmark's trials


def test_an_attack_resumed_with_other_needs_is_refused(tmp_path: Path) -> None:
    # about 2 s: the majority example as a subprocess: player on the scene, no renders
    player = f"subprocess:{sys.executable} -m players.examples.majority_player"
    argv = ["attack", "--items", str(SAMPLE), "--player", player, "--minigame-size", "2", "--steps", "4",
            "--num-envs", "4", "--eval-samples", "1", "--no-progress", "--out", str(tmp_path / "run")]
    status, out, err = _run([*argv, "--needs", "scene"])
    assert status == 0, err
    status, out, err = _run([*argv, "--needs", "scene,program"])
    assert status == 2 and "--needs was 'scene', now 'program,scene'" in err, err


def test_benchmark_trials_carry_the_input_of_their_external_players_only() -> None:
    given = {"needs": "image", "image_size": "64x48", "render_preset": "fast", "send_image": "inline"}
    plan = Plan(players=["oracle", "subprocess:x", "http://127.0.0.1:9/"], items="unused", sizes=[2],
                minigames=1, seeds=1, steps=4, out="unused", **given)
    by_player = {trial["player"]: trial for trial in plan.trials()}
    assert [by_player["oracle"][k] for k in given] == [None] * 4
    assert {k: by_player["subprocess:x"][k] for k in given} == {**given, "send_image": None}
    assert {k: by_player["http://127.0.0.1:9/"][k] for k in given} == given
    # A record of the same player sent other input is another trial: it is run again, not taken as done.
    trial = by_player["subprocess:x"]
    record = {k: trial[k] for k in ("trial", "player", "player_weights", "adversary", "size", "minigame", "seed",
                                    "steps")}
    assert not same_trial({**record, "needs": "scene"}, trial)
    assert same_trial({**record, "needs": "image", "image_size": "64x48", "render_preset": "fast"}, trial)


def test_a_benchmark_trial_loads_its_external_image_player_with_the_input_given(
    inline_server: _InlineImageServer, tmp_path: Path,
) -> None:
    # about 2 s: a 2-item mini-game, 4 training steps, one evaluation sample, images at 64 x 48
    plan = Plan(players=[_url(inline_server)], items=str(SAMPLE), sizes=[2], minigames=1, seeds=1, steps=4,
                out=str(tmp_path), num_envs=4, eval_samples=1, search_budget=2, needs="image", image_size="64x48",
                send_image="inline")
    prepare_minigames(plan, [item.item_id for item in load_items(plan.items)])
    record = run_trial(plan.trials()[0])
    assert "error" not in record, record.get("error")
    assert record["needs"] == "image" and record["send_image"] == "inline"
    assert record["visibility_checked"] and record["player_errors"] == 0
    assert record["player_queries"] > 0 and inline_server.refused == 0 and record["search"]["queries"] > 0
