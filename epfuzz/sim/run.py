"""A run of the emulator as data: what was built, how it was reordered, what the receiver saw and judged.

Kept apart from `epfuzz.sim.engine` (which builds and replays runs) because every consumer of a run (the
search's features, triage, the backends' outcomes) reads only this; `epfuzz.sim.engine` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epfuzz.ir.scenario import Scenario
from epfuzz.model.oracle import Violation
from epfuzz.protocols.base import Layout
from epfuzz.sim.memory import Starts
from epfuzz.sim.packets import FlushWait, Packet, Tlp, Wr
from epfuzz.sim.receive import Poll


@dataclass(init=False)
class SimRun:
    scenario: Scenario
    layout: Layout
    wrs: list[Wr]
    packets: list[Packet]          # arrival order at the responder
    tlps: list[Tlp]                # root-complex arrival order
    order: list[Tlp]               # visibility order
    tlp_inversions: list[tuple[Tlp, Tlp, str]]
    packet_inversions: list[tuple[Packet, Packet, str]]
    polls: list[Poll] = field(default_factory=list)
    violation: Violation | None = None
    flushes: list[FlushWait] = field(default_factory=list)  # each Flush's wait, in the order they were reached
    #: the epoch-start images of the run's built form (`Built.starts`), shared by the runs built over it
    starts: Starts | None = None

    def __init__(self, scenario: Scenario, layout: Layout, wrs: list[Wr], packets: list[Packet], tlps: list[Tlp],
                 order: list[Tlp], tlp_inversions: list[tuple[Tlp, Tlp, str]],
                 packet_inversions: list[tuple[Packet, Packet, str]], polls: list[Poll] | None = None,
                 violation: Violation | None = None, flushes: list[FlushWait] | None = None,
                 starts: Starts | None = None) -> None:
        """The dataclass's own `__init__`, written out: the generated one is interpreted even under mypyc (a
        run is made per execution: issue 31). `dataclass(init=False)` keeps its fields, eq and repr."""
        self.scenario, self.layout, self.wrs, self.packets, self.tlps = scenario, layout, wrs, packets, tlps
        self.order, self.tlp_inversions, self.packet_inversions = order, tlp_inversions, packet_inversions
        self.polls = [] if polls is None else polls
        self.violation = violation
        self.flushes = [] if flushes is None else flushes
        self.starts = starts

    @property
    def rules_fired(self) -> frozenset[str]:
        """The clauses of the run's passes, and the receiver-cache clause of a read served by stale L2 lines
        (`epfuzz.model.rxcache`: no pass, the clause the finding rests on)."""
        out = frozenset(r for _, _, r in self.tlp_inversions) | frozenset(r for _, _, r in self.packet_inversions)
        v = self.violation
        return out | {v.extra["rx_cache"]} if v is not None and "rx_cache" in v.extra else out

    def culprit_rules(self) -> frozenset[str]:
        """The rule clauses of the reorderings the finding depends on.

        For a stale accept: inversions where an earlier-arrived TLP overlapping the
        accepted bytes was still invisible when the receiver accepted, and the TLP
        that passed it was already visible (plus the packet-level overtakes of those
        stale TLPs' packets), and the receiver-cache clause of a read served by stale L2 lines
        (`epfuzz.model.rxcache`). Other reorderings in the run are noise for dedup.
        """
        v = self.violation
        if v is None:
            return frozenset()
        if v.kind != "stale-accept":
            return self.rules_fired
        rank: dict[int, int] = {}
        pos = 0
        for t in self.order:
            rank[id(t)] = pos
            pos += t.n
        lo, hi = v.offset, v.offset + v.length
        out = set()
        stale_pkts = set()
        for a, b, r in self.tlp_inversions:
            if (b.region == v.region and b.off < hi and lo < b.off + b.length
                    and rank[id(b)] >= v.position and rank[id(a)] < v.position):
                out.add(r)
        for t in self.order:
            if rank[id(t)] >= v.position and t.region == v.region and t.off < hi and lo < t.off + t.length:
                stale_pkts.add(t.pkt)
        for _, pb, r in self.packet_inversions:
            if pb.seq in stale_pkts:
                out.add(r)
        if "rx_cache" in v.extra:
            out.add(v.extra["rx_cache"])
        return frozenset(out)

    def fingerprint(self) -> tuple[object, ...]:
        """A compact, comparable trace: same scenario -> same fingerprint, always.

        Not the dedup signature of a finding (`epfuzz.triage.findings.signature`): this one
        names the whole run, so two runs compare equal only if they did the same.
        """
        return (
            tuple((w.id, w.channel, w.qp, w.post, w.start) for w in self.wrs),
            tuple((p.seq, p.qp, p.psn, p.arrive) for p in self.packets),
            tuple((t.seq, t.attrs.type, t.attrs.ro, t.region, t.off, t.length) for t in self.order),
            tuple((p.position, p.trigger, tuple(p.accepted)) for p in self.polls),
            None if self.violation is None else self.violation.summary(),
        )
