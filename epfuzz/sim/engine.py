"""The `sim` run: build packets and TLPs, let the adversary reorder them, replay into memory.

The receiver is woken after every TLP that lands in a region it watches and
reads the slots it then believes ready at that very instant: reading later can
only find more data landed, so this is the most demanding receiver, and what it
catches is exactly what some receiver timing could catch (see README, limits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from epfuzz import ops
from epfuzz.oracle import Violation, check
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Consume, Layout, Protocol, apply_spins
from epfuzz.scenario import Scenario
from epfuzz.sim.memory import Memory, expected_data
from epfuzz.sim.nic import Packet, Tlp, Wr, post_and_send, respond
from epfuzz.sim.pcie import apply_overtakes, packet_pass_rule, tlp_pass_rule

NET_WINDOW = 64  # packets adaptive routing may let one packet overtake


@dataclass
class Poll:
    position: int          # TLPs visible when the receiver looked
    trigger: int           # seq of the TLP that woke it
    accepted: list[str]
    consumes: list[Consume] = field(default_factory=list)   # what it accepted, for epfuzz.feedback


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
        for _, b, r in self.packet_inversions:
            if b.seq in stale_pkts:
                out.add(r)
        return frozenset(out)

    def signature(self) -> tuple[object, ...]:
        """A compact, comparable trace: same scenario -> same signature, always."""
        return (
            tuple((w.id, w.channel, w.qp, w.post, w.start) for w in self.wrs),
            tuple((p.seq, p.qp, p.psn, p.arrive) for p in self.packets),
            tuple((t.seq, t.attrs.type, t.attrs.ro, t.region, t.off, t.length) for t in self.order),
            tuple((p.position, p.trigger, tuple(p.accepted)) for p in self.polls),
            None if self.violation is None else self.violation.summary(),
        )


def build(scn: Scenario, proto: Protocol | None = None,
          arrival: Callable[[list[Packet]], list[Packet]] | None = None) -> SimRun:
    """Everything up to (not including) memory replay: deterministic in the scenario.

    `arrival`, if given, chooses the packet arrival order instead of the schedule's
    net overtakes (exhaustive exploration of adaptive routing uses it).
    """
    proto = proto or get_protocol(scn.protocol)
    lay = proto.layout(scn)
    psn = [0] * scn.topology.num_qps
    wrs: list[Wr] = []
    pkts: list[Packet] = []
    for e in range(scn.payload.epochs):
        programs = apply_spins(proto.sender(scn, lay, e), scn)
        w, p = post_and_send(scn, programs, e, len(wrs), psn)
        wrs += w
        pkts += p
    for i, p in enumerate(pkts):
        p.seq = i
    net = [(o.index, o.distance) for o in scn.schedule if o.stage == "net"]
    arrivals, pinv = (pkts, [])
    if arrival is not None:
        arrivals = arrival(pkts)
    elif net and scn.knobs.adaptive_routing:
        arrivals, pinv = apply_overtakes(pkts, net, packet_pass_rule(True), NET_WINDOW)
    prologue = {e: proto.epoch_prologue(scn, lay, e) for e in range(scn.payload.epochs)}
    tlps = respond(scn, arrivals, lay.max_signals, 0, proto.targets, prologue)
    moves = [(o.index, o.distance) for o in scn.schedule if o.stage == "pcie"]
    order, tinv = apply_overtakes(tlps, moves, tlp_pass_rule(), scn.knobs.reorder_window)
    return SimRun(scn, lay, wrs, arrivals, tlps, order, tinv, pinv)


@dataclass
class _Reading:
    """Bytes the receiver accepted and is still reading (faults.rx_lag)."""

    consume: Consume
    epoch: int
    left: int


def replay(run: SimRun, proto: Protocol | None = None) -> SimRun:
    """Land TLPs in visibility order; wake the receiver; stop at the first violation."""
    scn = run.scenario
    proto = proto or get_protocol(scn.protocol)
    lay = run.layout
    mem = Memory(lay)
    rx = proto.receiver(scn, lay)
    watch = rx.watch
    name = scn.protocol
    lag = scn.faults.rx_lag
    flush = proto.flush_on_accept
    data_target = proto.targets.get(ops.DATA, 0)
    epoch = -1
    polls = run.polls
    reading: list[_Reading] = []
    deferred: list[tuple[Consume, int]] = []   # (consume, seq of the signal TLP) awaiting the flush
    invisible_data = {t.seq for t in run.order if t.region == ops.DATA and t.target == data_target} if flush else set()

    def close(e: int, pos: int) -> Violation | None:
        if e >= 0 and not rx.done():
            return Violation("hang", name, e, -1, "not every channel saw its final signal", position=pos)
        return None

    def verify(c: Consume, e: int, t: Tlp, pos: int) -> Violation | None:
        expected = expected_data(lay, e) if c.region == ops.DATA else None
        v = check(c, mem.regions[c.region], expected, lay, name, e)
        if v is not None:
            v.trigger, v.position = t.seq, pos
        return v

    # the receiver issues its own stores (resets) first and sees its own writes: it
    # polls again only once all of this epoch's local stores have been applied
    local_left: dict[int, int] = {}
    for t in run.order:
        if t.local:
            local_left[t.epoch] = local_left.get(t.epoch, 0) + 1
    pending_local = 0
    pos = 0
    for t in run.order:
        if t.epoch != epoch:
            v = close(epoch, pos)
            if v:
                run.violation = v
                return run
            if not proto.release_at_accept:
                reading.clear()  # the credit follows the read: the sender waits for it
            epoch = t.epoch
            mem.start_epoch(epoch, poison=proto.poison, reset=proto.reset_signals)
            rx.start_epoch(epoch)
            pending_local = local_left.get(epoch, 0)
        mem.apply(t)
        pos += t.n
        if t.local:
            pending_local -= 1
        if reading:
            for r in reading:
                c = r.consume
                if t.region == c.region and t.off < c.offset + c.length and c.offset < t.off + t.length:
                    v = verify(c, r.epoch, t, pos)
                    if v is not None:
                        v.kind = "overwritten-while-read"
                        run.violation = v
                        return run
                r.left -= t.n
            reading = [r for r in reading if r.left > 0]
        if flush:
            invisible_data.discard(t.seq)
        if t.region in watch and not pending_local:
            consumed = rx.poll(mem, epoch)
            if consumed:
                polls.append(Poll(pos, t.seq, [c.what for c in consumed], consumed))
                for c in consumed:
                    if flush and c.region == ops.DATA:
                        deferred.append((c, t.seq))
                        continue
                    v = verify(c, epoch, t, pos)
                    if v is not None:
                        run.violation = v
                        return run
                    if lag and c.region == ops.DATA:
                        reading.append(_Reading(c, epoch, lag))
        if deferred:  # the flush read completes once the data path's earlier TLPs are visible
            still = []
            for c, trig in deferred:
                if any(s < trig for s in invisible_data):
                    still.append((c, trig))
                    continue
                v = verify(c, epoch, t, pos)
                if v is not None:
                    run.violation = v
                    return run
            deferred = still
    run.violation = close(epoch, pos)
    return run


def simulate(scn: Scenario, proto: Protocol | None = None) -> SimRun:
    return replay(build(scn, proto), proto)
