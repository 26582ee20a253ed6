"""`sim`: the deterministic PCIe/IB ordering emulator, always available."""

from __future__ import annotations

from epfuzz.backends.base import Backend, Outcome
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.sim.engine import SimRun, simulate


class SimBackend(Backend):
    name = "sim"
    deterministic = True

    def availability(self) -> tuple[bool, str]:
        from epfuzz.core import native

        return True, f"emulator of the PCIe r5.0 ordering table and IB RC semantics; {native.describe()}"

    def run(self, scn: Scenario, proto: Protocol, repeats: int = 1) -> Outcome:
        return outcome_of(simulate(scn, proto))


def outcome_of(run: SimRun) -> Outcome:
    """The outcome of a run already simulated (the search's executor has the run: no second simulation)."""
    v = run.violation
    return Outcome("sim", v, runs=1, hits=int(v is not None), rules_fired=run.culprit_rules(),
                   summary=summarize(run), detail=run)


def summarize(run: object) -> str:
    from epfuzz.sim.engine import SimRun

    assert isinstance(run, SimRun)
    units = sum(t.n for t in run.order)
    lines = [f"{len(run.wrs)} WRs, {len(run.packets)} packets, {units} TLPs in {len(run.order)} runs, "
             f"{len(run.polls)} receiver polls that accepted data"]
    if run.tlp_inversions or run.packet_inversions:
        lines.append("reorderings: " + ", ".join(sorted(run.rules_fired)))
    if run.violation is not None:
        lines.append("the finding depends on: " + (", ".join(sorted(run.culprit_rules())) or "arrival order alone"))
    return "\n".join(lines)
