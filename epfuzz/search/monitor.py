"""The monitor: executions, corpus and features over time, and what each move and feedback did.

One for every engine: `progress.csv` gets a row a second (the columns of
epfuzz.campaign.common.PROGRESS_HEADER, which `epfuzz report` reads), a terminal gets one line
rewritten in place, and `stats()` (written as the run's `stats.json`) says per move how often it
was drawn, kept an input and found a bug, and per feedback how many features it contributed:
how a user sees that a plug-in move or feedback was used.
"""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO


def peak_rss_mb() -> int:
    """This process's peak RSS (the guided loop runs in it)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # KiB on Linux


@dataclass
class MoveStats:
    used: int = 0
    kept: int = 0
    found: int = 0


#: seconds between two progress lines where stderr is no terminal (one line each, not rewritten)
OFF_TTY_EVERY = 10


@dataclass
class Monitor:
    execs: int = 0
    features: int = 0
    corpus: int = 0
    findings: int = 0
    moves: dict[str, MoveStats] = field(default_factory=dict)
    feedbacks: dict[str, int] = field(default_factory=dict)     # feedback -> features it showed first
    start: float = field(default_factory=time.monotonic)
    last_row: float = 0.0
    last_line: float = 0.0      # when the last off-terminal progress line was written (0: none yet)

    def executed(self, move: str, kept: bool, found: bool) -> None:
        self.execs += 1
        m = self.moves.setdefault(move, MoveStats())
        m.used += 1
        m.kept += kept
        m.found += found

    def new_features(self, feedback: str, n: int) -> None:
        if n:
            self.feedbacks[feedback] = self.feedbacks.get(feedback, 0) + n

    def row(self, elapsed: float | None = None, execs: int | None = None) -> str:
        el = time.monotonic() - self.start if elapsed is None else elapsed
        n = self.execs if execs is None else execs
        return (f"{el:.1f},{n},{n / el if el else 0:.0f},{self.features},{self.corpus},{self.findings},"
                f"{peak_rss_mb()}\n")

    def due(self) -> bool:
        """A row is due (one a second): the only clock here, and it decides nothing but output."""
        now = time.monotonic()
        if now - self.last_row >= 1:
            self.last_row = now
            return True
        return False

    def line(self, seconds: float, out: TextIO | None = None) -> None:
        """The progress line: rewritten in place on a terminal; elsewhere (CI, `| tee`, a file) a plain
        line every OFF_TTY_EVERY seconds, the first after one; none in a JSON log (progress.csv has it)."""
        from epfuzz.infra.log import json_lines, quiet

        if quiet():
            return
        out = out or sys.stderr
        text = (f"[{time.monotonic() - self.start:5.0f}s / {seconds:.0f}s] execs {self.execs} "
                f"features {self.features} corpus {self.corpus} findings {self.findings}")
        if out.isatty():
            out.write(f"\r{text}   ")
        elif not json_lines() and time.monotonic() - (self.last_line or self.start) >= (
                OFF_TTY_EVERY if self.last_line else 1):
            self.last_line = time.monotonic()
            out.write(f"progress: {text.strip()}\n")
            out.flush()

    def stats(self) -> dict[str, Any]:
        return {"execs": self.execs, "features": self.features, "corpus": self.corpus, "findings": self.findings,
                "moves": {k: vars(v) for k, v in sorted(self.moves.items())},
                "feedbacks": dict(sorted(self.feedbacks.items()))}
