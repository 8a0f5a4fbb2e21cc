"""A player that is any program speaking JSON lines on stdin / stdout (docs/players.md).

The whole batch is written by a writer thread while reader threads drain stdout and
stderr, so neither side can block on a full pipe (stdout is read at most a few lines
ahead of the game, stderr only for its last lines). Each answer must arrive within
`timeout_s` of the previous one; the first answer of a fresh process, which may be
loading a model, within `startup_timeout_s` (or `timeout_s`, when that is longer).
A hang, a crash, a stdout line longer than MAX_LINE_BYTES or an answer outside the
vocabulary becomes an error answer for the query it concerns; after a hang, a crash
or an endless line the process is replaced and the rest of the batch is sent to the
new one.

A stdout line that answers no awaited query (a start-up banner, a stray print, a
line that is not JSON, an id not in the batch) is skipped and counted in
`protocol_warnings`, so one stray line cannot shift every later answer onto the
wrong query. An answer with the id of a later query of the batch means the
current query was skipped: it fails, and the line answers its own query.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clevr_game.scene import MAX_JSON_DEPTH, nested_deeper_than
from players.protocol import (
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

MAX_LINE_BYTES = 4 * 1024 * 1024
"""A longer stdout line fails the awaited query and the process is killed: an answer line is a
few dozen bytes, and reading a line without end would hold all of it in memory."""

_LINES_BUFFERED = 16  # stdout lines read ahead of the game: the player waits, memory stays bounded
_STDERR_LINES_KEPT = 20
_STDERR_LINE_BYTES = 4096  # of each stderr line, enough for an error line; the rest is skipped unkept
_EXIT_WAIT_S = 1.0  # for the exit code of a process that closed its stdout
_STOP_GRACE_S = 1.0  # for a process to exit by itself once its stdin is closed
_PUT_RETRY_S = 0.1  # how often a stdout reader blocked on a full buffer checks that it is still wanted

_log = logging.getLogger(__name__)


class _Timeout:
    """Marks a wait for a line that ran out of time."""


_TIMED_OUT = _Timeout()


class _TooLong:
    """Marks a stdout line longer than MAX_LINE_BYTES; nothing after it is read."""


_TOO_LONG = _TooLong()


def _kill_group(popen: subprocess.Popen[bytes]) -> None:
    # Only while the leader is not reaped: its pid (the group id) cannot be reused yet.
    if popen.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()


class _Process:
    """One running player process and the threads that feed and drain its pipes."""

    def __init__(self, command: Sequence[str], cwd: str | None, env: Mapping[str, str]) -> None:
        self.popen = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,  # its own group, so helpers it spawns die with it
        )
        self.answered_any = False
        self._lines: queue.Queue[bytes | _TooLong | None] = queue.Queue(maxsize=_LINES_BUFFERED)
        self._gone = threading.Event()
        self._put_back: deque[bytes] = deque()
        self._stderr_tail: deque[str] = deque(maxlen=_STDERR_LINES_KEPT)
        self._writer: threading.Thread | None = None
        self._stdout_pump = threading.Thread(target=self._pump_stdout, daemon=True)
        self._stderr_pump = threading.Thread(target=self._pump_stderr, daemon=True)
        self._stdout_pump.start()
        self._stderr_pump.start()
        # A player forgotten without close() must not outlive the interpreter.
        weakref.finalize(self, _kill_group, self.popen)

    def _pump_stdout(self) -> None:
        assert self.popen.stdout is not None
        with contextlib.suppress(OSError, ValueError):  # the pipe closed under us: the process was killed
            while True:
                line = self.popen.stdout.readline(MAX_LINE_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    self._hand_over(_TOO_LONG)
                    return
                if not self._hand_over(line):
                    return
        self._hand_over(None)

    def _hand_over(self, line: bytes | _TooLong | None) -> bool:
        """Queue `line` for the reader, waiting while the buffer is full; False once the process is gone."""
        while not self._gone.is_set():
            try:
                self._lines.put(line, timeout=_PUT_RETRY_S)
                return True
            except queue.Full:
                continue
        return False

    def _pump_stderr(self) -> None:
        assert self.popen.stderr is not None
        continued = False  # the last piece read ended inside a line longer than _STDERR_LINE_BYTES
        with contextlib.suppress(OSError, ValueError):
            while True:
                piece = self.popen.stderr.readline(_STDERR_LINE_BYTES)
                if not piece:
                    break
                text = "" if continued else piece.decode("utf-8", "replace").strip()
                continued = not piece.endswith(b"\n")
                if text:
                    self._stderr_tail.append(text)

    def _write(self, payload: bytes) -> None:
        assert self.popen.stdin is not None
        try:
            self.popen.stdin.write(payload)
            self.popen.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the process died or was killed; the reader reports it

    def send(self, payload: bytes) -> None:
        """Write `payload` in the background; the reader side never waits for it."""
        if self._writer is not None:
            self._writer.join()
        self._writer = threading.Thread(target=self._write, args=(payload,), daemon=True)
        self._writer.start()

    def next_line(self, timeout_s: float) -> bytes | None | _Timeout | _TooLong:
        """The next stdout line, None at end of output, _TIMED_OUT, or _TOO_LONG."""
        if self._put_back:
            return self._put_back.popleft()
        try:
            return self._lines.get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            return _TIMED_OUT

    def put_back(self, line: bytes) -> None:
        """Make `line` the next one `next_line` returns."""
        self._put_back.appendleft(line)

    def exit_description(self) -> str:
        """`exited with code 3` / `was killed by signal 9` / `closed its stdout`."""
        try:
            code = self.popen.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return "closed its stdout"
        # Let the stderr pump read the last words of the process.
        self._stderr_pump.join(timeout=_EXIT_WAIT_S)
        if code < 0:
            return f"was killed by signal {-code}"
        return f"exited with code {code}"

    def last_stderr(self) -> str:
        return self._stderr_tail[-1] if self._stderr_tail else ""

    def kill(self) -> None:
        self._gone.set()
        _kill_group(self.popen)
        self._join_threads()

    def stop(self) -> None:
        """Close stdin (a polite end of input), then kill whatever is still running."""
        # A writer still blocked on a full pipe holds the stdin lock: skip the politeness.
        if self._writer is None or not self._writer.is_alive():
            with contextlib.suppress(OSError):
                assert self.popen.stdin is not None
                self.popen.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=_STOP_GRACE_S)
        self.kill()

    def _join_threads(self) -> None:
        for thread in (self._writer, self._stdout_pump, self._stderr_pump):
            if thread is not None:
                thread.join(timeout=_EXIT_WAIT_S)
        for pipe in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


@dataclass
class _ReadOutcome:
    answer: Answer
    process_lost: bool = False


class SubprocessPlayer(Player):
    """A player run as `command`, one JSON query per stdin line, one JSON answer per stdout line.

    `needs` says what the program is sent (`scene`, `image`, `program`); `image_spec`
    the render preset and size of its images (None: the `fast` preset at its own size); `timeout_s`
    bounds the wait for each answer, `startup_timeout_s` the wait for the first answer
    of a fresh process (never less than `timeout_s`); `max_restarts` is how many times in a row the
    process may be replaced without giving an answer in between, after which every
    further query fails at once (a player that cannot start is not retried forever).
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        needs: Sequence[str] | frozenset[str] = frozenset({NEED_SCENE}),
        image_spec: ImageSpec | None = None,
        name: str | None = None,
        timeout_s: float = 10.0,
        startup_timeout_s: float = 30.0,
        max_restarts: int = 3,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not command:
            raise ValueError("subprocess player: empty command")
        if not (0 < timeout_s <= threading.TIMEOUT_MAX and 0 <= startup_timeout_s <= threading.TIMEOUT_MAX) \
                or max_restarts < 0:
            raise ValueError(
                "subprocess player: timeout_s must be > 0, startup_timeout_s and max_restarts >= 0, "
                f"both times at most {threading.TIMEOUT_MAX:g} s"
            )
        self.command = [str(part) for part in command]
        self.needs = check_needs(needs)
        self.image_spec = image_spec_for(self.needs, image_spec)
        self.name = name or one_line(f"subprocess:{shlex.join(self.command)}", 80)
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.max_restarts = max_restarts
        self.cwd = cwd
        # Unbuffered output for Python players that forget to flush.
        self.env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
        self.restarts = 0
        """Processes replaced after a hang or a crash, over the player's life."""
        self.protocol_warnings = 0
        """Stdout lines skipped because they answer no awaited query, over the player's life."""
        self._process: _Process | None = None
        self._failures_in_row = 0
        self._last_failure = ""
        self._closed = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------ batches

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        with self._lock:
            answers: list[Answer] = []
            while len(answers) < len(queries):
                pending = queries[len(answers):]
                refusal = self._refusal()
                if refusal is not None:
                    answers.extend(Answer.failed(q.item_id, f"{self.name}: {refusal}") for q in pending)
                    break
                process = self._running_process(pending[0])
                if isinstance(process, Answer):
                    answers.append(process)
                    continue
                process.send(self._encode(pending))
                unanswered = Counter(q.item_id for q in pending)
                for query in pending:
                    unanswered[query.item_id] -= 1
                    outcome = self._read_answer(process, query, unanswered)
                    answers.append(outcome.answer)
                    if outcome.process_lost:
                        self._lose_process(outcome.answer.error or "")
                        break
            return answers

    def _encode(self, queries: Sequence[Query]) -> bytes:
        lines = [json.dumps(query_to_wire(q, self.needs), separators=(",", ":")) for q in queries]
        return ("\n".join(lines) + "\n").encode("utf-8")

    def _refusal(self) -> str | None:
        if self._closed:
            return "player is closed"
        if self._failures_in_row > self.max_restarts:
            return (
                f"gave up after {self._failures_in_row} failures in a row "
                f"(max_restarts={self.max_restarts}); last: {self._last_failure}"
            )
        return None

    def _running_process(self, first: Query) -> _Process | Answer:
        """The live process, started if needed; a start failure is the error answer of `first`."""
        if self._process is not None:
            return self._process
        try:
            self._process = _Process(self.command, self.cwd, self.env)
        except OSError as exc:
            error = f"{self.name}: query {first.item_id!r}: cannot start {shlex.join(self.command)}: {exc.strerror or exc}"
            self._lose_process(error)
            return Answer.failed(first.item_id, error)
        return self._process

    def _lose_process(self, error: str) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None
            self.restarts += 1
        self._failures_in_row += 1
        self._last_failure = error.removeprefix(f"{self.name}: ") or "unknown failure"

    def _read_answer(self, process: _Process, query: Query, later: Counter[str]) -> _ReadOutcome:
        """The answer to `query`, skipping lines that answer no awaited query.

        `later` counts the ids of the batch's queries still to come after `query`.
        """
        where = f"{self.name}: query {query.item_id!r}"
        if process.answered_any:
            timeout_s, wait = self.timeout_s, ""
        else:  # loading a model may take longer than any later answer
            timeout_s, wait = max(self.startup_timeout_s, self.timeout_s), "start-up wait of a fresh process; "
        # Stray lines do not extend the wait: a chatty process that never answers is a hang.
        deadline = time.monotonic() + timeout_s
        skipped = _Skipped()
        while True:
            line = process.next_line(deadline - time.monotonic())
            if isinstance(line, _Timeout):
                return _ReadOutcome(
                    Answer.failed(
                        query.item_id,
                        f"{where}: no answer within {timeout_s:g} s ({wait}hang{skipped.note()}); process killed",
                    ),
                    process_lost=True,
                )
            if isinstance(line, _TooLong):
                return _ReadOutcome(
                    Answer.failed(
                        query.item_id,
                        f"{where}: a stdout line longer than {MAX_LINE_BYTES} bytes (an answer is one short "
                        f"JSON line){skipped.note()}; process killed",
                    ),
                    process_lost=True,
                )
            if line is None:
                stderr = process.last_stderr()
                said = f" (last stderr: {stderr})" if stderr else ""
                return _ReadOutcome(
                    Answer.failed(
                        query.item_id,
                        f"{where}: process {process.exit_description()} before answering{said}{skipped.note()}",
                    ),
                    process_lost=True,
                )
            data, answer_id = _decoded(line)
            if data is _TOO_DEEP:
                # Its id cannot be read safely: the line stands for the answer awaited.
                return _ReadOutcome(Answer.failed(
                    query.item_id,
                    f"{where}: answer nests JSON arrays or objects more than {MAX_JSON_DEPTH} levels deep",
                ))
            if answer_id == query.item_id:
                process.answered_any = True
                self._failures_in_row = 0  # it is alive and answering
                return _ReadOutcome(answer_from_wire(query, data, self.name))
            if answer_id is not None and later[answer_id] > 0:
                # The player skipped this query; the line is the answer of a later one.
                process.put_back(line)
                return _ReadOutcome(
                    Answer.failed(
                        query.item_id,
                        f"{where}: no answer: the player answered {shown(answer_id)} first "
                        "(answers must come in query order)",
                    )
                )
            skipped.add(line.decode("utf-8", "replace").rstrip("\r\n"))
            self._warn_stray_line(skipped.last)

    def _warn_stray_line(self, text: str) -> None:
        self.protocol_warnings += 1
        if self.protocol_warnings == 1:
            _log.warning(
                "%s: skipped a stdout line that answers no awaited query: %s "
                "(stdout is for answers only; further skipped lines are counted in protocol_warnings)",
                self.name, shown(text),
            )

    # ------------------------------------------------------------ life cycle

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._process is not None:
                self._process.stop()
                self._process = None

    @property
    def pid(self) -> int | None:
        """The id of the running process, if one is running."""
        return self._process.popen.pid if self._process is not None else None


_TOO_DEEP = object()  # stands for a line whose JSON nests deeper than MAX_JSON_DEPTH


def _decoded(line: bytes) -> tuple[object, str | None]:
    """The JSON value of a stdout line and its answer id (None when it has none); _TOO_DEEP for a nest."""
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, None
    except RecursionError:
        return _TOO_DEEP, None
    if nested_deeper_than(data):
        return _TOO_DEEP, None
    if not isinstance(data, dict) or "id" not in data or isinstance(data["id"], (dict, list)):
        return data, None
    return data, str(data["id"])


class _Skipped:
    """The stray lines skipped while waiting for one answer: how many, and the last."""

    def __init__(self) -> None:
        self.count = 0
        self.last = ""

    def add(self, text: str) -> None:
        self.count += 1
        self.last = text

    def note(self) -> str:
        """`; 2 stray lines skipped, last 'loading...'` for an error line, or nothing."""
        if not self.count:
            return ""
        plural = "s" if self.count > 1 else ""
        return f"; {self.count} stray line{plural} skipped, last {shown(self.last)}"
