"""The one finding sink: signature, case file, the line a person reads, hand-off to triage.

Every engine (guided, its jobs, the libFuzzer harnesses) offers its violating executions here.
A signature seen before is dropped (per process: jobs dedup again when the run is grouped); a new
one is written as a case file (epfuzz.triage.findings.write_finding, atomically) and announced with its
one-line replay command. Grouping by root cause is not done here: the campaign hands the case
files to epfuzz.triage.findings.group_findings at the end, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from epfuzz.backends.base import Outcome
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.search.monitor import ALARM_MARK, Console
from epfuzz.triage.findings import replay_command, signature, write_finding


class FindingSink:
    def __init__(self, folder: Path, protocol: str, proto: Protocol, backend: str = "sim",
                 out: TextIO | None = None, console: Console | None = None) -> None:
        self.folder, self.protocol, self.proto, self.backend = folder, protocol, proto, backend
        self.console = console or Console(out)
        self.seen: set[str] = set()
        self.findings: list[tuple[str, Path, str]] = []     # (signature, case, summary)

    def offer(self, scn: Scenario, data: bytes, outcome: Outcome) -> Path | None:
        """Write the finding if its signature is new; its case file, or None for a repeat."""
        sig = signature(scn, outcome, self.proto)
        if sig in self.seen:
            return None
        self.seen.add(sig)
        path = write_finding(self.folder, scn, data, outcome, self.proto)   # raises NoSpace on a full disk
        summary = outcome.violation.summary() if outcome.violation else ""
        self.findings.append((sig, path, summary))
        alarm = "" if self.proto.expected(scn) != "clean" else (  # "": no promise here
            f"{ALARM_MARK}{self.protocol} is expected clean; this is a bug in the model\n")
        # one line per raw finding (its signature and scenario are in the case file): a campaign finds
        # dozens, and the bug table groups them; the marker is what a job's log is read for
        self.console.finding(summary, replay_command(path, self.backend), alarm)
        return path
