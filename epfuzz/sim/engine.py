"""The `sim` run: build packets and TLPs, let the adversary reorder them, replay into memory.

The receiver is woken after every TLP that lands in a region it watches and
reads the slots it then believes ready at that very instant: reading later can
only find more data landed, so this is the most demanding receiver, and what it
catches is exactly what some receiver timing could catch (see README, limits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from epfuzz.oracle import Violation
from epfuzz.protocols.base import Layout, Protocol, apply_spins
from epfuzz.protocols.opcheck import check_programs
from epfuzz.scenario import Scenario
from epfuzz.sim.adversary import QpStreams, apply_overtakes
from epfuzz.sim.nvlink import is_nvlink, issue_order, pass_rule
from epfuzz.sim.packets import FlushWait, Packet, Tlp, Wr
from epfuzz.sim.pass_rules import packet_pass_rule
from epfuzz.sim.receive import Poll, Receiving
from epfuzz.sim.requester import post_and_send
from epfuzz.sim.responder import respond

NET_WINDOW = 64  # packets adaptive routing may let one packet overtake

__all__ = ["NET_WINDOW", "Poll", "SimRun", "build", "replay", "simulate"]


@dataclass
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

    @property
    def rules_fired(self) -> frozenset[str]:
        return frozenset(r for _, _, r in self.tlp_inversions) | frozenset(
            r for _, _, r in self.packet_inversions)

    def culprit_rules(self) -> frozenset[str]:
        """The rule clauses of the reorderings the finding depends on.

        For a stale accept: inversions where an earlier-arrived TLP overlapping the
        accepted bytes was still invisible when the receiver accepted, and the TLP
        that passed it was already visible (plus the packet-level overtakes of those
        stale TLPs' packets). Other reorderings in the run are noise for dedup.
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
        return frozenset(out)

    def fingerprint(self) -> tuple[object, ...]:
        """A compact, comparable trace: same scenario -> same fingerprint, always.

        Not the dedup signature of a finding (`epfuzz.findings.signature`): this one
        names the whole run, so two runs compare equal only if they did the same.
        """
        return (
            tuple((w.id, w.channel, w.qp, w.post, w.start) for w in self.wrs),
            tuple((p.seq, p.qp, p.psn, p.arrive) for p in self.packets),
            tuple((t.seq, t.attrs.type, t.attrs.ro, t.region, t.off, t.length) for t in self.order),
            tuple((p.position, p.trigger, tuple(p.accepted)) for p in self.polls),
            None if self.violation is None else self.violation.summary(),
        )


def build(scn: Scenario, proto: Protocol,
          arrival: Callable[[list[Packet]], list[Packet]] | None = None) -> SimRun:
    """Everything up to (not including) memory replay: deterministic in the scenario.

    `arrival`, if given, chooses the packet arrival order instead of the schedule's
    net overtakes (exhaustive exploration of adaptive routing uses it).
    """
    lay = proto.layout(scn)
    psn = [0] * scn.topology.num_qps
    wrs: list[Wr] = []
    pkts: list[Packet] = []
    flushes: list[FlushWait] = []
    for e in range(scn.payload.epochs):
        programs = apply_spins(proto.sender(scn, lay, e), scn)
        check_programs(programs, lay, proto.name or type(proto).__name__, e)
        w, ps = post_and_send(scn, programs, e, len(wrs), psn, flushes)
        wrs += w
        pkts += ps
    for i, p in enumerate(pkts):
        p.seq = i
    net = [(o.index, o.distance) for o in scn.schedule if o.stage == "net"]
    arrivals: list[Packet] = pkts
    pinv: list[tuple[Packet, Packet, str]] = []
    if arrival is not None:
        arrivals = arrival(pkts)
    elif net and scn.knobs.adaptive_routing:
        arrivals, pinv = apply_overtakes(pkts, net, packet_pass_rule(True), NET_WINDOW)
    if is_nvlink(scn):  # GPU stores reach the peer in issue order, then the NVLink clauses apply
        arrivals = issue_order(arrivals, wrs)
    prologue = {e: proto.epoch_prologue(scn, lay, e) for e in range(scn.payload.epochs)}
    tlps = respond(scn, arrivals, lay.max_signals, 0, proto.targets, prologue)
    moves = [(o.index, o.distance) for o in scn.schedule if o.stage == "pcie"]
    window = scn.knobs.reorder_window
    order, tinv = apply_overtakes(tlps, moves, pass_rule(scn, arrivals), window,
                                  QpStreams(tlps, window) if moves else None)
    return SimRun(scn, lay, wrs, arrivals, tlps, order, tinv, pinv, flushes=flushes)


def replay(run: SimRun, proto: Protocol) -> SimRun:
    """Land TLPs in visibility order; wake the receiver; stop at the first violation."""
    step = Receiving(run.scenario, proto, run.layout, run.order, run.polls)
    pos = 0
    for t in run.order:
        if t.epoch != step.epoch:
            v = step.close(pos)
            if v is not None:
                run.violation = v
                return run
            step.start_epoch(t.epoch)
            v = step.wake(pos)
            if v is not None:
                run.violation = v
                return run
        pos += t.n
        v = step.land(t, pos)
        if v is not None:
            run.violation = v
            return run
    run.violation = step.close(pos)
    return run


def simulate(scn: Scenario, proto: Protocol) -> SimRun:
    """Build and replay `scn` under `proto` (the caller resolved it once, by the scenario's name)."""
    return replay(build(scn, proto), proto)
