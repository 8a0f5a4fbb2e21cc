"""A player behind an HTTP endpoint: POST {"queries": [...]} -> {"answers": [...]} (docs/players.md).

Built on httpx. A failed request (connection refused, the deadline passed, an HTTP
error status, a redirect, a body that is not the expected JSON) fails every query
of that request with one line naming the cause; a bad single answer fails only its
query.

`timeout_s` is a deadline for the whole request: connecting, sending the body and
reading the full response. Per-operation socket timeouts alone would let a server
that trickles one byte at a time hold a request for ever, so a timer also shuts the
connection down when the deadline passes. Redirects are not followed, except 307
and 308 to the same scheme, host and port (they keep method and body): the request
carries the body and the caller's `headers`, which must not reach another server.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from clevr_game.scene import MAX_JSON_DEPTH, nested_deeper_than
from players.protocol import (
    IMAGE_INLINE_FIELD,
    IMAGE_PATH_FIELD,
    NEED_IMAGE,
    NEED_SCENE,
    Answer,
    ImageSpec,
    Player,
    Query,
    answer_from_wire,
    check_needs,
    image_spec_for,
    one_line,
    query_to_wire,
    shown,
)

if TYPE_CHECKING:
    import httpx

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""A longer response body fails its request: answers to one batch are far smaller."""

MAX_REQUEST_BYTES = 64 * 1024 * 1024
"""A batch whose request body would be longer goes in several requests; one query longer than this fails
alone. Images sent inline make the bulk (a 128 x 96 render is under 20 kB of base64), so one request
holds thousands of small ones and the server never reads an unbounded body."""

SEND_IMAGE_MODES = ("path", "inline")
"""How an image reaches the server: its path on this machine, or the PNG itself in the query."""

MAX_SAME_ORIGIN_REDIRECTS = 5

_FOLLOWED_REDIRECTS = (307, 308)  # the only codes that keep method and body
_DEFAULT_PORTS = {"http": 80, "https": 443}
_BODY_START, _BODY_END = b'{"queries":[', b"]}"
_BODY_FRAME = len(_BODY_START) + len(_BODY_END)
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _QueryRefused(Exception):
    """A query that cannot be put on the wire (its image unreadable, or too long); the message is one line."""


class _RequestFailed(Exception):
    """A request that produced no usable list of answers; the message is one line."""


class _Deadline:
    """Shuts down the request's connection when `timeout_s` has passed.

    httpx learns of the connection through httpcore's documented `trace` extension;
    shutting the socket down wakes a read or write blocked on it at once.
    """

    def __init__(self, timeout_s: float, wait: str = "") -> None:
        self.timeout_s = timeout_s
        self.wait = wait  # which wait this is, for the failure line
        self._end = time.monotonic() + timeout_s
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._finished = False
        self.passed = False
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._finished = True

    def left_s(self) -> float:
        """Seconds left; raises _RequestFailed once the deadline has passed."""
        left = self._end - time.monotonic()
        if left <= 0 or self.passed:
            raise self.failure()
        return left

    def failure(self) -> _RequestFailed:
        return _RequestFailed(f"no complete response within {self.timeout_s:g} s{self.wait}")

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: remember each socket a connection opens (TCP, then TLS)."""
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            expired = self.passed and not self._finished
        if expired:  # connected just as the timer fired
            self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.passed = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        # Already closed by httpx: shutdown then fails, which is fine.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class HttpPlayer(Player):
    """A player served at `url`; `max_batch_size` splits large batches into several requests.

    `timeout_s` bounds each whole request (connect, send, full response);
    `startup_timeout_s`, when given, bounds the requests until the first one is
    answered instead (never less than `timeout_s`: a server may load its model on
    the first request); `headers` are added to every request and are never sent to
    another host. Environment proxies and .netrc are not used. A response must come
    uncompressed (the request asks for `identity`): a body in any other content
    encoding fails its request unread, so a few kilobytes cannot unpack to gigabytes.

    A player that needs images gets them at `image_spec` (None: the `fast` preset at
    its own size); `send_image` is `path` (the PNG's path on this machine) or `inline`
    (the PNG base64-encoded in the query, for a server on another machine). A batch
    is split so that no request body exceeds MAX_REQUEST_BYTES.
    """

    def __init__(
        self,
        url: str,
        *,
        needs: Sequence[str] | frozenset[str] = frozenset({NEED_SCENE}),
        image_spec: ImageSpec | None = None,
        send_image: str = "path",
        name: str | None = None,
        timeout_s: float = 30.0,
        startup_timeout_s: float | None = None,
        max_batch_size: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"http player: url must start with http:// or https://, got {url!r}")
        times_ok = 0 < timeout_s <= threading.TIMEOUT_MAX and (
            startup_timeout_s is None or 0 <= startup_timeout_s <= threading.TIMEOUT_MAX)
        if not times_ok or (max_batch_size is not None and max_batch_size < 1):
            raise ValueError(f"http player: timeout_s must be in (0, {threading.TIMEOUT_MAX:g}], startup_timeout_s "
                             "in [0, the same] and max_batch_size >= 1")
        self.url = url
        self.needs = check_needs(needs)
        self.image_spec = image_spec_for(self.needs, image_spec)
        if send_image not in SEND_IMAGE_MODES:
            raise ValueError(f"http player: send_image must be one of {', '.join(SEND_IMAGE_MODES)}, got {send_image!r}")
        if send_image == "inline" and NEED_IMAGE not in self.needs:
            raise ValueError(f"http player: send_image 'inline' is for a player that needs {NEED_IMAGE!r}")
        self.send_image = send_image
        self.name = name or url
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self._answered_any = False
        self.max_batch_size = max_batch_size
        # identity: a compressed body could expand far past MAX_RESPONSE_BYTES in one chunk.
        self.headers = {"Content-Type": "application/json", "Accept-Encoding": "identity", **(headers or {})}
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        most = self.max_batch_size or max(len(queries), 1)
        answers: dict[int, Answer] = {}
        request: list[tuple[int, bytes]] = []  # (index in `queries`, the query's JSON)
        size = _BODY_FRAME  # of the request body so far
        for index, query in enumerate(queries):
            try:
                part = self._encoded(query)
            except _QueryRefused as exc:
                answers[index] = Answer.failed(query.item_id, f"{self.name}: query {query.item_id!r}: {exc}")
                continue
            if request and (len(request) == most or size + 1 + len(part) > MAX_REQUEST_BYTES):
                answers.update(self._answer_request(queries, request))
                request, size = [], _BODY_FRAME
            size += len(part) + (1 if request else 0)  # a comma before every query but the first
            request.append((index, part))
        if request:
            answers.update(self._answer_request(queries, request))
        return [answers[index] for index in range(len(queries))]

    def _encoded(self, query: Query) -> bytes:
        """The query's JSON, its image inlined when asked; _QueryRefused when that cannot be sent."""
        wire = query_to_wire(query, self.needs)
        if self.send_image == "inline" and IMAGE_PATH_FIELD in wire:
            wire[IMAGE_INLINE_FIELD] = _png_base64(wire.pop(IMAGE_PATH_FIELD))
        part = json.dumps(wire, separators=(",", ":")).encode("utf-8")
        if _BODY_FRAME + len(part) > MAX_REQUEST_BYTES:  # not even a request of its own could carry it
            raise _QueryRefused(f"the query is {len(part)} bytes of JSON, more than a request may hold "
                                f"({MAX_REQUEST_BYTES} bytes)")
        return part

    def _answer_request(self, queries: Sequence[Query], request: list[tuple[int, bytes]]) -> dict[int, Answer]:
        asked = [(index, queries[index]) for index, _ in request]
        try:
            raw_answers = self._post([part for _, part in request], len(request))
        except _RequestFailed as exc:
            return {index: Answer.failed(q.item_id, f"{self.name}: query {q.item_id!r}: {exc}") for index, q in asked}
        return {index: answer_from_wire(q, raw, self.name)
                for (index, q), raw in zip(asked, raw_answers, strict=True)}

    def _post(self, parts: list[bytes], expected: int) -> list[Any]:
        body = _BODY_START + b",".join(parts) + _BODY_END
        payload = self._fetch(body)
        try:
            data = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise _RequestFailed(f"malformed JSON response {shown(payload[:200].decode('utf-8', 'replace'))}") from None
        except RecursionError:
            too_deep = True  # too deep even to parse
        else:
            too_deep = nested_deeper_than(data)
        if too_deep:
            raise _RequestFailed(f"response nests JSON arrays or objects more than {MAX_JSON_DEPTH} levels deep")
        self._answered_any = True
        answers = data.get("answers") if isinstance(data, dict) else None
        if not isinstance(answers, list):
            raise _RequestFailed("response has no 'answers' list")
        if len(answers) != expected:
            raise _RequestFailed(f"response has {len(answers)} answers for {expected} queries")
        return answers

    def _fetch(self, body: bytes) -> bytes:
        """The body of a 2xx response to POST `body`, within the deadline; _RequestFailed otherwise."""
        import httpx

        client = self._http_client()
        if self._answered_any or self.startup_timeout_s is None:
            deadline = _Deadline(self.timeout_s)
        else:
            deadline = _Deadline(max(self.startup_timeout_s, self.timeout_s), " (start-up wait: no request answered yet)")
        with deadline:
            try:
                return self._post_following_same_origin(client, httpx.URL(self.url), body, deadline)
            except _RequestFailed:
                raise
            except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, ValueError) as exc:
                if deadline.passed or isinstance(exc, httpx.TimeoutException):
                    raise deadline.failure() from None
                raise _RequestFailed(f"POST failed: {_reason(exc)}") from None

    def _http_client(self) -> httpx.Client:
        import httpx  # imported on first use: the command line stays quick to start

        with self._client_lock:
            if self._client is None:
                # No kept-alive connections: each request connects afresh, so a server
                # that recovers is used at once and the deadline sees every socket.
                self._client = httpx.Client(
                    follow_redirects=False, trust_env=False, limits=httpx.Limits(max_keepalive_connections=0)
                )
            return self._client

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _post_following_same_origin(
        self, client: httpx.Client, url: httpx.URL, body: bytes, deadline: _Deadline
    ) -> bytes:
        import httpx

        for _ in range(MAX_SAME_ORIGIN_REDIRECTS + 1):
            left = deadline.left_s()
            request = client.build_request(
                "POST", url, content=body, headers=self.headers,
                timeout=httpx.Timeout(left), extensions={"trace": deadline.trace},
            )
            response = client.send(request, stream=True)
            try:
                if response.status_code not in _FOLLOWED_REDIRECTS or "location" not in response.headers:
                    return _checked_body(response, deadline)
                target = _redirect_target(url, response)
            finally:
                response.close()
            url = target
        raise _RequestFailed(f"POST redirected more than {MAX_SAME_ORIGIN_REDIRECTS} times")


def _png_base64(path: str) -> str:
    """The PNG at `path`, base64-encoded; _QueryRefused for a file that is unreadable, too long or no PNG."""
    try:
        with open(path, "rb") as handle:
            # Base64 makes 4 bytes of 3: read no more than a request could carry.
            data = handle.read(MAX_REQUEST_BYTES * 3 // 4 + 1)
    except OSError as exc:
        raise _QueryRefused(f"cannot read the image {shown(path)} to send inline: {exc.strerror or exc}") from None
    if len(data) > MAX_REQUEST_BYTES * 3 // 4:
        raise _QueryRefused(f"the image {shown(path)} is too long to send inline (a request holds at most "
                            f"{MAX_REQUEST_BYTES} bytes)")
    if not data.startswith(_PNG_SIGNATURE):
        raise _QueryRefused(f"the image {shown(path)} is not a PNG")
    return base64.b64encode(data).decode("ascii")


def _checked_body(response: httpx.Response, deadline: _Deadline) -> bytes:
    """The body of a 2xx response, read under the deadline; _RequestFailed for any other status."""
    status = response.status_code
    if 300 <= status < 400:
        location = response.headers.get("location")
        target = f" to {shown(location)}" if location is not None else " without a Location"
        raise _RequestFailed(
            f"POST redirected with HTTP {status}{target}: not followed "
            "(only 307/308 to the same scheme, host and port are)"
        )
    if not 200 <= status < 300:
        raise _RequestFailed(f"POST failed with HTTP {status} {one_line(response.reason_phrase)}".rstrip())
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise _RequestFailed(
            f"response in content encoding {shown(encoding)}, not asked for (the request accepts identity only)"
        )
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_raw():  # raw: nothing is unpacked, so the cap counts what is kept
        deadline.left_s()
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise _RequestFailed(f"response longer than {MAX_RESPONSE_BYTES} bytes")
        chunks.append(chunk)
    deadline.left_s()
    return b"".join(chunks)


def _redirect_target(url: httpx.URL, response: httpx.Response) -> httpx.URL:
    """The Location of a 307/308 when it keeps scheme, host and port; _RequestFailed otherwise."""
    location = response.headers["location"]
    try:
        target = url.join(location)
    except Exception:  # httpx raises several types for a malformed URL
        raise _RequestFailed(f"POST redirected with HTTP {response.status_code} to a malformed URL {shown(location)}") from None
    if _origin(target) != _origin(url):
        raise _RequestFailed(
            f"POST redirected with HTTP {response.status_code} to {shown(location)}: not followed "
            "(only 307/308 to the same scheme, host and port are)"
        )
    return target


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme))


def _reason(error: BaseException) -> str:
    """The root cause of a failed request in a few words (`connection refused`)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, OSError) and cause.strerror:
            return one_line(cause.strerror.lower())
        cause = cause.__cause__ or cause.__context__
    return one_line(str(error) or type(error).__name__)
