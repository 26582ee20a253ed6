"""structlog set-up: lines for people on any stream (a terminal, CI, `| tee`, a file), JSON lines only
when asked (`epfuzz --log-format json`, which a program reading the log, such as the host of a guest
campaign, asks for). Colours only on a terminal."""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading
import time
from typing import TextIO

import structlog


class _Stderr:
    """Whatever sys.stderr is when a line is logged, not when logging was configured: a stream
    swapped since (pytest's capture, a caller's redirect) may be closed by then."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class _JsonStderr:
    """sys.stderr under `--log-format json`: the commands' own one-line messages (`epfuzz: unknown harness ...`,
    a bad case file) are written with print(), not the logger; each such line becomes an `error` event, so
    every stderr line is JSON as the docs say. Lines that are JSON already (the logger's) pass as they are."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.pending = ""
        #: writes come from more than one thread (libFuzzer's relay threads, the logger): the pending part
        #: of a line is read and replaced under it, so that no line is lost or written twice (review)
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.pending += text
            *lines, self.pending = self.pending.split("\n")
            for line in lines:
                self.inner.write(_as_json(line) + "\n")
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def close_line(self) -> None:
        """What is left without a newline (at exit, or when JSON lines are turned off), as one event of its own."""
        with self.lock:
            try:
                if self.pending:
                    self.inner.write(_as_json(self.pending) + "\n")
                self.inner.flush()
            except (OSError, ValueError):  # the stream was closed before exit (a test's capture): nothing to say
                pass
            self.pending = ""

    def __getattr__(self, name: str) -> object:  # isatty, fileno, encoding: the stream's own
        return getattr(self.inner, name)


def _as_json(line: str) -> str:
    if line.startswith("{"):
        try:
            json.loads(line)
            return line
        except ValueError:
            pass
    return _error_event(line.removeprefix("epfuzz: "), None)


def _error_event(message: str, path: object) -> str:
    """An `error` event: `path` is the file the error is about, null where it is about none (one schema)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return json.dumps({"event": "error", "level": "error", "message": message,
                       "path": str(path) if path is not None else None, "timestamp": stamp}, sort_keys=True)


def error_line(message: str, path: object = None) -> None:
    """A command's error: for people the line `epfuzz: MESSAGE` on stderr; in a JSON log an `error` event with
    the file it is about as its `path` (a program had to cut it out of the message: ops trial 1205 item 5)."""
    if _JSON[0]:
        sys.stderr.write(_error_event(message, path) + "\n")
    else:
        sys.stderr.write(f"epfuzz: {message}\n")
    sys.stderr.flush()


_JSON = [False]
_JSON_EXIT: list[object] = []


def _close_json_stderr() -> None:
    if isinstance(sys.stderr, _JsonStderr):
        sys.stderr.close_line()


def quiet() -> bool:
    """`epfuzz -q`: the summary and the bug table only (inherited by a campaign's processes)."""
    return os.environ.get("EPFUZZ_QUIET", "") == "1"


def json_lines() -> bool:
    """Whether the log is JSON lines (`--log-format json`): a program reads it, so what the human
    output shows elsewhere (the bug table, the progress line) is logged too."""
    return _JSON[0]


def configure(json_lines: bool = False, level: int = logging.INFO) -> None:
    """Human lines unless `json_lines`: whether stderr is a terminal decides the colours, never the
    format (off a terminal the format used to switch to JSON, so CI logs and `| tee` read as data)."""
    _JSON[0] = json_lines
    if isinstance(sys.stderr, _JsonStderr) and not json_lines:
        sys.stderr.close_line()  # a line left without its newline is not dropped
        sys.stderr = sys.stderr.inner
    elif json_lines and not isinstance(sys.stderr, _JsonStderr):
        sys.stderr = _JsonStderr(sys.stderr)
        if not _JSON_EXIT:
            _JSON_EXIT.append(atexit.register(_close_json_stderr))
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(sort_keys=True) if json_lines
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


def get_logger(**bound: object) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger("epfuzz").bind(**bound)
