"""The one small interface every backend implements (sim, verbs, cuda).

Three things, as shuttle's Scheduler has three methods: say whether you can run
here (and why not), run one scenario, and say whether a verdict is reproducible
from the scenario alone (deterministic) or needs repetitions and a rate.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from epfuzz.oracle import Violation
from epfuzz.protocols.base import Protocol
from epfuzz.scenario import Scenario


@dataclass
class Outcome:
    backend: str
    violation: Violation | None
    runs: int = 1                     # repetitions of the scenario
    hits: int = 0                     # repetitions that produced a violation
    rules_fired: frozenset[str] = frozenset()
    summary: str = ""                 # a short trace summary for `epfuzz run`
    detail: Any = None                # backend-specific (the SimRun for sim)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "finding" if self.violation is not None else "clean"

    @property
    def rate(self) -> float:
        return self.hits / self.runs if self.runs else 0.0


class Backend(abc.ABC):
    name: str = ""
    deterministic: bool = True

    @abc.abstractmethod
    def availability(self) -> tuple[bool, str]:
        """(can run here, why not / how): checked before any fuzzing starts."""

    @abc.abstractmethod
    def run(self, scn: Scenario, proto: Protocol, repeats: int = 1) -> Outcome:
        """Run the scenario; never raise for a protocol violation, report it."""
