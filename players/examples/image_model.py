"""Bring your own image model: a runnable example to copy (docs/players.md, "Bring your own image model").

One model, served two ways:

    python players/examples/image_model.py subprocess        # JSON lines: a query on stdin, an answer on stdout
    python players/examples/image_model.py http --port 8000  # POST {"queries": [...]} -> {"answers": [...]}

Replace `load_model` and `answer` with your own model; the rest is the protocol and
stays as it is. The stand-in model is the shipped neuro-symbolic pixel player
(trained on `fast` renders at 128 x 96), so this file needs clevr-game installed
only for it.
"""

from __future__ import annotations

import argparse
import base64
import functools
import io
import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO

from PIL import Image

IMAGE_PATH = "image"  # players.protocol.IMAGE_PATH_FIELD: the PNG's path (subprocess, or HTTP --send-image path)
IMAGE_INLINE = "image_png_base64"  # players.protocol.IMAGE_INLINE_FIELD: the PNG itself (HTTP --send-image inline)
MAX_BODY_BYTES = 64 * 2**20  # the game never sends more in one request (players.http_player.MAX_REQUEST_BYTES)

# ---------------------------------------------------------------- your model: replace these two functions


@functools.cache
def load_model() -> Any:
    """Load the weights once per process."""
    from players.registry import load

    return load("neuro-symbolic")


def answer(question: str, image: Image.Image) -> str:
    """The model: one answer of CLEVR's vocabulary (`yes`, `no`, `0`..`10`, a colour, size, material or shape).

    `image` is RGB at the size given by `--image-size`. Raise to report that this
    question cannot be answered: it becomes the query's `error`.
    """
    from players.protocol import Query

    # The shipped player reads PNG files; a model of yours would take the pixels as they are.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "image.png"
        image.save(path)
        reply = load_model().answer(Query("q", question, image_path=str(path)))
    if not reply.ok:
        raise RuntimeError(reply.error)
    return reply.text


# ---------------------------------------------------------------- the protocol (docs/players.md)


def read_image(query: dict[str, Any]) -> Image.Image:
    """The query's image: inline when the game sent it so, else from the path on this machine."""
    if IMAGE_INLINE in query:
        source: str | io.BytesIO = io.BytesIO(base64.b64decode(query[IMAGE_INLINE], validate=True))
    else:
        source = query[IMAGE_PATH]
    with Image.open(source) as image:
        return image.convert("RGB")  # decoded now, so a broken file fails this query and no file stays open


def reply(query: Any) -> dict[str, Any]:
    """The answer object for one decoded query; any failure is this query's `error`, never a crash."""
    item_id = query.get("id") if isinstance(query, dict) else None
    try:
        return {"id": item_id, "answer": answer(query["question"], read_image(query))}
    except Exception as exc:  # one bad query must not end the process that serves the others
        return {"id": item_id, "error": " ".join(f"{type(exc).__name__}: {exc}".split())[:500]}


def serve_lines(lines: TextIO, out: TextIO) -> None:
    """Subprocess mode: the game writes a batch of queries, one per line, and reads the answers in order."""
    for line in lines:
        if not line.strip():
            continue
        try:
            answer_object = reply(json.loads(line))
        except json.JSONDecodeError as exc:
            answer_object = {"id": None, "error": f"not a JSON line: {exc}"}
        out.write(json.dumps(answer_object) + "\n")
        out.flush()  # the game waits for each line: an answer held in a buffer looks like a hang


class _Handler(BaseHTTPRequestHandler):
    """HTTP mode: one POST carries a batch; the response has exactly one answer per query, in order."""

    model_lock = threading.Lock()  # requests arrive on several threads; the model answers one batch at a time

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        try:
            length = int(self.headers.get("Content-Length", ""))
            if not 0 <= length <= MAX_BODY_BYTES:
                raise ValueError(f"body of {length} bytes")
            queries = json.loads(self.rfile.read(length))["queries"]
            if not isinstance(queries, list):
                raise TypeError("'queries' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            # A malformed request fails as a whole: the game records it for each query it held.
            self._send(400, {"error": f"expected a JSON body {{\"queries\": [...]}}: {exc}"})
            return
        with self.model_lock:
            answers = [reply(query) for query in queries]
        self._send(200, {"answers": answers})

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def serve_http(host: str, port: int) -> None:
    server = ThreadingHTTPServer((host, port), _Handler)
    server.daemon_threads = True
    # Printed once the model is loaded and the port bound: a script may wait for this line.
    print(f"listening on http://{host}:{server.server_address[1]}/", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    modes.add_parser("subprocess", help="answer JSON lines on stdin (--player 'subprocess:python THIS subprocess')")
    http = modes.add_parser("http", help="serve POSTed queries (--player http://HOST:PORT --send-image inline)")
    http.add_argument("--port", type=int, required=True, help="0: any free port (the URL is printed on stderr)")
    http.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to serve other machines (default: this one only)")
    args = parser.parse_args(argv)
    # Loaded before the first query: its time counts against --player-startup-timeout, not one answer's.
    load_model()
    if args.mode == "subprocess":
        serve_lines(sys.stdin, sys.stdout)
    else:
        serve_http(args.host, args.port)


if __name__ == "__main__":
    main()
