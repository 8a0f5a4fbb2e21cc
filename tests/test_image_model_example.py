"""The worked example of docs/players.md, "Bring your own image model": players/examples/image_model.py.

The example runs for real in both of its modes, on sample scenes rendered by the game
(the `fast` preset at 128 x 96, in this module's own render cache): as a JSON-lines
subprocess reading each PNG by path, and as an HTTP server reading each PNG inline.
Its stand-in model is the shipped neuro-symbolic player, so its answers must be the
ones that player gives in this process on the same images.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from clevr_game.cli import build_parser, main
from clevr_game.datafiles import SAMPLE_DIR
from players import protocol
from players.examples import image_model
from players.pixel.images import ensure_images
from players.protocol import ImageSpec, Query
from players.registry import load, load_guarded

pytestmark = pytest.mark.usefixtures("own_render_cache")

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "players" / "examples" / "image_model.py"
DOCS = REPO / "docs" / "players.md"
SECTION = "## Bring your own image model"
SPEC = ImageSpec("fast", 128, 96)  # the stand-in model's own: neuro-symbolic was trained on these renders
INPUT = {"needs": "image", "image_size": "128x96", "render_preset": "fast"}
SCENES = 4  # 3 questions each in the sample
LAST_LINE = re.compile(r"accuracy: \d\.\d{4} blind: \d\.\d{4} drop: \d\.\d{4} random-valid: (\d\.\d{4}|n/a)")


@pytest.fixture(scope="module")
def queries(tmp_path_factory: pytest.TempPathFactory) -> list[Query]:
    """The sample's questions about its first scenes, each with the scene's render (about 2 s)."""
    data = tmp_path_factory.mktemp("sample")
    for name in ("scenes.json", "questions.json"):
        shutil.copyfile(SAMPLE_DIR / name, data / name)  # the images go beside the data, not into the package
    _, paths = ensure_images(data, SPEC, only=range(SCENES))
    questions = json.loads((data / "questions.json").read_text())["questions"]
    return [Query(f"q{i}", q["question"], image_path=str(paths[q["image_index"]]))
            for i, q in enumerate(questions) if q["image_index"] < SCENES]


@pytest.fixture(scope="module")
def expected(queries: list[Query]) -> list[str | None]:
    with load("neuro-symbolic") as model:
        answers = model.answer_batch(queries)
    assert all(a.ok for a in answers), [a.error for a in answers]
    return [a.text for a in answers]


def test_the_example_reads_the_field_names_of_the_protocol() -> None:
    # The example spells them out so that a copy of it stands alone.
    assert image_model.IMAGE_PATH == protocol.IMAGE_PATH_FIELD
    assert image_model.IMAGE_INLINE == protocol.IMAGE_INLINE_FIELD


# ---------------------------------------------------------------- subprocess mode: the PNG by path


def test_as_a_subprocess_it_answers_as_the_model_does_in_process(
    queries: list[Query], expected: list[str | None],
) -> None:
    # 6 to 9 s on 2 CPUs: the process starts and loads the model, then 14 answers of a quarter to half a second
    spec = f"subprocess:{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))} subprocess"
    with load_guarded(spec, player_input=INPUT) as player:
        assert player.needs == {"image"} and player.image_spec == SPEC
        answers = player.answer_batch(queries)
        assert [a.text for a in answers] == expected, [a.error for a in answers]
        # A query it cannot answer fails alone, and the same process answers the next one.
        missing = Query("bad", "Is there a cube?", image_path=str(Path(queries[0].image_path).with_name("no.png")))
        bad, good = player.answer_batch([missing, queries[0]])
    assert bad.error is not None and "player reported an error: FileNotFoundError" in bad.error
    assert good.text == expected[0]
    assert player.player.restarts == 0 and player.player.protocol_warnings == 0


# ---------------------------------------------------------------- http mode: the PNG inline


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """The example's HTTP mode on a free loopback port; its URL once it says it listens."""
    process = subprocess.Popen([sys.executable, str(EXAMPLE), "http", "--port", "0"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    listening = threading.Event()

    def drain() -> None:  # the server logs each request on stderr: a full pipe would stop it
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith("listening on "):
                listening.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        assert listening.wait(30), "".join(lines)
        yield next(line for line in lines if line.startswith("listening on ")).split()[-1]
    finally:
        process.terminate()
        process.wait(10)


def test_over_http_it_answers_inline_images_as_the_model_does_in_process(
    server_url: str, queries: list[Query], expected: list[str | None],
) -> None:
    # about 1 s once the server has loaded the model; 5 queries a request, so the batch takes 3 requests
    with load_guarded(server_url, player_input={**INPUT, "send_image": "inline"}, max_batch_size=5) as player:
        assert player.player.send_image == "inline"
        answers = player.answer_batch(queries)
    assert [a.text for a in answers] == expected, [a.error for a in answers]


def _post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as failed:
        with contextlib.closing(failed):
            return failed.code, json.loads(failed.read())


def test_over_http_a_bad_query_fails_alone_and_a_bad_request_gets_400(server_url: str, queries: list[Query]) -> None:
    png = Path(queries[0].image_path).read_bytes()
    good = {"id": "a", "question": queries[0].question, image_model.IMAGE_INLINE: base64.b64encode(png).decode()}
    broken = {"id": "b", "question": "Is there a cube?", image_model.IMAGE_INLINE: "not base64!"}
    status, body = _post(server_url, json.dumps({"queries": [broken, good]}).encode())
    assert status == 200
    assert [a["id"] for a in body["answers"]] == ["b", "a"]
    assert "error" in body["answers"][0] and "answer" not in body["answers"][0]
    assert body["answers"][1]["answer"] in protocol.CLEVR.answer_values
    for malformed in (b"not json", b'{"answers": []}', b'{"queries": {}}'):
        status, body = _post(server_url, malformed)
        assert status == 400 and "expected a JSON body" in body["error"]


# ---------------------------------------------------------------- the docs' commands


def _docs_commands() -> list[list[str]]:
    """Each `clevr-game evaluate` command of the docs' section on the example, as the argv after `clevr-game`."""
    section = DOCS.read_text().split(f"\n{SECTION}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip() for line in section.replace("\\\n", " ").splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("clevr-game evaluate ")]


def test_the_docs_commands_for_the_example_parse() -> None:
    commands = _docs_commands()
    players = [argv[argv.index("--player") + 1] for argv in commands]
    assert "subprocess:python players/examples/image_model.py subprocess" in players
    assert any(p.startswith("http://127.0.0.1:") for p in players)
    for argv in commands:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                build_parser(argv).parse_args(argv)
            except SystemExit:
                pytest.fail(f"clevr-game {shlex.join(argv)}: {err.getvalue()}")


@pytest.mark.slow
def test_the_docs_smoke_evaluation_of_the_subprocess_example_writes_a_card(tmp_path: Path) -> None:
    # 2 to 3 minutes on 2 CPUs: 20 questions, 2 small trials, every scene and moved scene rendered at 128 x 96
    argv = next(a for a in _docs_commands() if "subprocess:" in a[a.index("--player") + 1])
    player = argv.index("--player") + 1
    argv[player] = argv[player].replace("python players/", f"{shlex.quote(sys.executable)} {REPO}/players/")
    argv[argv.index("--out") + 1] = str(tmp_path / "card")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([*argv, "--no-progress"])
    assert status in (0, None), err.getvalue()
    assert LAST_LINE.fullmatch(out.getvalue().strip().splitlines()[-1]), out.getvalue()
    card = json.loads((tmp_path / "card" / "card.json").read_text())
    assert card["player"]["image"] == SPEC.as_dict() and card["evaluation_errors"]["errors"] == 0
