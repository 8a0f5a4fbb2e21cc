"""A player behind an HTTP endpoint: POST {"queries": [...]} -> {"answers": [...]} (docs/players.md).

Standard library only (urllib). A failed request (connection refused, timeout, an
HTTP error status, a body that is not the expected JSON) fails every query of that
request with one line naming the cause; a bad single answer fails only its query.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from players.protocol import (
    NEED_SCENE,
    Answer,
    Player,
    Query,
    answer_from_wire,
    check_needs,
    one_line,
    query_to_wire,
    shown,
)


class _RequestFailed(Exception):
    """A request that produced no usable list of answers; the message is one line."""


class HttpPlayer(Player):
    """A player served at `url`; `max_batch_size` splits large batches into several requests."""

    def __init__(
        self,
        url: str,
        *,
        needs: Sequence[str] | frozenset[str] = frozenset({NEED_SCENE}),
        name: str | None = None,
        timeout_s: float = 30.0,
        max_batch_size: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"http player: url must start with http:// or https://, got {url!r}")
        if timeout_s <= 0 or (max_batch_size is not None and max_batch_size < 1):
            raise ValueError("http player: timeout_s must be > 0 and max_batch_size >= 1")
        self.url = url
        self.needs = check_needs(needs)
        self.name = name or url
        self.timeout_s = timeout_s
        self.max_batch_size = max_batch_size
        self.headers = {"Content-Type": "application/json", **(headers or {})}

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        size = self.max_batch_size or max(len(queries), 1)
        answers: list[Answer] = []
        for start in range(0, len(queries), size):
            answers.extend(self._answer_request(queries[start : start + size]))
        return answers

    def _answer_request(self, queries: Sequence[Query]) -> list[Answer]:
        try:
            raw_answers = self._post([query_to_wire(q, self.needs) for q in queries], len(queries))
        except _RequestFailed as exc:
            return [Answer.failed(q.item_id, f"{self.name}: query {q.item_id!r}: {exc}") for q in queries]
        return [answer_from_wire(q, raw, self.name) for q, raw in zip(queries, raw_answers, strict=True)]

    def _post(self, wire_queries: list[dict[str, Any]], expected: int) -> list[Any]:
        body = json.dumps({"queries": wire_queries}, separators=(",", ":")).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise _RequestFailed(f"POST failed with HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _RequestFailed(f"no response within {self.timeout_s:g} s") from None
            raise _RequestFailed(f"POST failed: {_reason(exc.reason)}") from None
        except TimeoutError:
            raise _RequestFailed(f"no response within {self.timeout_s:g} s") from None
        except (ConnectionError, OSError) as exc:
            # e.g. the server closed the connection mid-response.
            raise _RequestFailed(f"POST failed: {_reason(exc)}") from None
        try:
            data = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise _RequestFailed(f"malformed JSON response {shown(payload[:200].decode('utf-8', 'replace'))}") from None
        answers = data.get("answers") if isinstance(data, dict) else None
        if not isinstance(answers, list):
            raise _RequestFailed("response has no 'answers' list")
        if len(answers) != expected:
            raise _RequestFailed(f"response has {len(answers)} answers for {expected} queries")
        return answers


def _reason(reason: Any) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, OSError) and reason.strerror:
        return one_line(reason.strerror.lower())
    return one_line(str(reason))
