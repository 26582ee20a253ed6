"""The executor: input bytes -> scenario -> one run of the emulator -> an execution with its trace.

The run is simulated once: a violating execution's `outcome` (what the finding sink writes and
signs) is built from the same run, not by simulating the scenario again. `execute` may be
replaced (epfuzz.repair runs a repaired protocol on the case's platform); `around` wraps the call
(the `lines` feedback traces it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epfuzz.backends.base import Outcome
from epfuzz.encoding import codec
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.search.featcore import units_of
from epfuzz.sim.engine import SimRun, simulate


@dataclass
class Execution:
    data: bytes
    scenario: Scenario
    run: SimRun
    _outcome: Outcome | None = field(default=None, repr=False)

    @property
    def violation(self) -> Any:
        return self.run.violation

    @property
    def units(self) -> int:
        """TLPs in the run: the cost of one execution of this input."""
        return units_of(self.run.order)

    @property
    def outcome(self) -> Outcome:
        if self._outcome is None:
            from epfuzz.backends.sim import outcome_of

            self._outcome = outcome_of(self.run)
        return self._outcome


class SimExecutor:
    def __init__(self, protocol: str, proto: Protocol, preset: str = "spec",
                 execute: Callable[[Scenario, Protocol], SimRun] = simulate,
                 around: Callable[[Callable[[], SimRun]], SimRun] | None = None) -> None:
        self.protocol, self.proto, self.preset = protocol, proto, preset
        self.execute, self.around = execute, around
        self.execs = 0

    def run(self, data: bytes) -> Execution:
        return self.run_scenario(codec.decode(data, self.protocol, self.preset), data)

    def run_scenario(self, scn: Scenario, data: bytes | None = None) -> Execution:
        """A scenario already decoded (or drawn: the sampler baseline); `data` its bytes if known."""
        # counted when the plug-in raises too: the input ran (a seed that raised reported "0 execs", author trial)
        self.execs += 1
        if self.around is None:
            run = self.execute(scn, self.proto)
        else:
            run = self.around(lambda: self.execute(scn, self.proto))
        return Execution(codec.encode(scn) if data is None else data, scn, run)
