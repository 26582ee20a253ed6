"""structlog set-up: lines for people on any stream (a terminal, CI, `| tee`, a file), JSON lines only
when asked (`epfuzz --log-format json`, which a program reading the log, such as the host of a guest
campaign, asks for). Colours only on a terminal."""

from __future__ import annotations

import logging
import os
import sys

import structlog


class _Stderr:
    """Whatever sys.stderr is when a line is logged, not when logging was configured: a stream
    swapped since (pytest's capture, a caller's redirect) may be closed by then."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_JSON = [False]


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
