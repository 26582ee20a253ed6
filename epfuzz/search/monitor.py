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
import threading
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

FINDING_MARK = "=== epfuzz finding: "
ALARM_MARK = "=== FALSE ALARM: "
REPLAY_MARK = "; replay: "


def finding_line(summary: str, replay: str) -> str:
    """One raw finding as a job writes it to its log (which a campaign's parent reads back: parse_finding)."""
    return f"{FINDING_MARK}{summary}{REPLAY_MARK}{replay}"


def parse_finding(line: str) -> tuple[str, str] | None:
    """(summary, replay command) of a finding_line, or None for any other line."""
    line = line.strip()
    if not line.startswith(FINDING_MARK) or REPLAY_MARK not in line:
        return None
    summary, _, replay = line[len(FINDING_MARK):].rpartition(REPLAY_MARK)
    return summary, replay


class Console:
    """A campaign's live output, the same for every engine and for one job or many (issue 28.3): the
    progress line (rewritten in place on a terminal; elsewhere, as CI and `| tee` see it, a plain
    `progress:` line every OFF_TTY_EVERY seconds, the first after one; in a JSON log a `fuzz.progress`
    event as often), and one line per raw finding with its replay command (a `fuzz.finding` event in a
    JSON log). Under -q nothing but false alarms, which are epfuzz's own bugs. `log`: the campaign's logger, so
    these events carry its harness, backend, preset and engine as its other events do (trial 0205 item 4)."""

    def __init__(self, out: TextIO | None = None, log: Any = None) -> None:
        self.out = out
        self.log = log
        self.start = time.monotonic()
        self.last = 0.0         # when the last off-terminal line or event was written (0: none yet)
        self.pending = False    # a progress line stands unfinished on the terminal
        self.lock = threading.Lock()   # the libFuzzer campaign relays each job's findings from its own thread
        self.shown: set[str] = set()   # replay commands said: two jobs that find one signature write one case

    def _out(self) -> TextIO:
        return self.out or sys.stderr   # whatever stderr is now (a test's capture may have swapped it)

    def _log(self) -> Any:
        from epfuzz.infra.log import get_logger

        return self.log if self.log is not None else get_logger()

    def progress(self, elapsed: float, seconds: float, execs: int, features: int, corpus: int,
                 findings: int) -> None:
        from epfuzz.infra.log import json_lines, quiet

        if quiet():
            return
        rate = execs / elapsed if elapsed > 0 else 0.0
        text = (f"[{elapsed:5.0f}s / {seconds:.0f}s] execs {execs} ({rate:.0f}/s) features {features} "
                f"corpus {corpus} findings {findings}")
        with self.lock:
            out = self._out()
            if out.isatty() and not json_lines():
                out.write(f"\r{text}   ")
                out.flush()
                self.pending = True
                return
            now = time.monotonic()
            if now - (self.last or self.start) < (OFF_TTY_EVERY if self.last else 1):
                return
            self.last = now
            if json_lines():
                self._log().info("fuzz.progress", elapsed=round(elapsed), seconds=round(seconds), execs=execs,
                                  exec_per_s=round(rate), features=features, corpus=corpus, findings=findings)
            else:
                out.write(f"progress: {text.strip()}\n")
                out.flush()

    def finding(self, summary: str, replay: str, alarm: str = "") -> None:
        """One raw finding, and `alarm` where it is a false alarm."""
        from epfuzz.infra.log import json_lines, quiet

        with self.lock:
            if replay in self.shown:
                return
            self.shown.add(replay)
            out = self._out()
            self._clear(out)
            if json_lines():
                if not quiet():
                    self._log().info("fuzz.finding", summary=summary, replay=replay)
                if alarm:
                    self._log().error("fuzz.false_alarm", text=alarm.strip("= \n"))
                return
            if quiet():  # -q: the summary says the false alarms (how many, and one of them), not each here
                return
            out.write(finding_line(summary, replay) + "\n" + alarm)
            out.flush()

    def alarm(self, text: str) -> None:
        """A false alarm alone (a job's, relayed)."""
        from epfuzz.infra.log import json_lines, quiet

        with self.lock:
            out = self._out()
            self._clear(out)
            if json_lines():
                self._log().error("fuzz.false_alarm", text=text.strip("= \n"))
            elif not quiet():  # -q: the summary counts them
                out.write(text.rstrip("\n") + "\n")
                out.flush()

    def relay(self, line: str) -> bool:
        """A line of a job's log (its stderr): a raw finding or a false alarm is shown as this process's
        own, so N jobs read as one run; False for any other line."""
        if (found := parse_finding(line)) is not None:
            self.finding(*found)
            return True
        if line.startswith(ALARM_MARK):
            self.alarm(line)
            return True
        return False

    def end(self) -> None:
        """The run is over: a progress line left on the terminal gets its line end."""
        with self.lock:
            if self.pending:
                out = self._out()
                out.write("\n")
                out.flush()
                self.pending = False

    def _clear(self, out: TextIO) -> None:
        if self.pending:   # the finding takes the progress line's place; the next progress goes below it
            out.write("\r\x1b[K")
            self.pending = False


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
        m = self.moves.get(move)
        if m is None:
            m = self.moves[move] = MoveStats()
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

    def line(self, seconds: float, console: Console | None = None) -> None:
        """The progress line, through the campaign's console (see Console)."""
        (console or Console()).progress(time.monotonic() - self.start, seconds, self.execs, self.features,
                                        self.corpus, self.findings)

    def stats(self) -> dict[str, Any]:
        return {"execs": self.execs, "features": self.features, "corpus": self.corpus, "findings": self.findings,
                "moves": {k: vars(v) for k, v in sorted(self.moves.items())},
                "feedbacks": dict(sorted(self.feedbacks.items()))}
