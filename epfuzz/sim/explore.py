"""Exhaustive exploration: every visibility order the rule table allows, for small scenarios.

The fuzzer samples schedules; this enumerates them, so "unreachable" can be a
proof for a given scenario rather than an absence of luck. Depth-first over
"which pending TLP becomes visible next", merging states that are equal for the
receiver (same visible set, same signal/CQ bytes, same receiver state): TLPs that
write disjoint data bytes commute, so the visible set determines the data region.
With adaptive routing on, every packet arrival order (per epoch) is enumerated
too, for scenarios of at most MAX_AR_PACKETS packets per epoch.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from epfuzz import ops
from epfuzz.errors import InputError
from epfuzz.oracle import Violation, check
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Protocol, Receiver
from epfuzz.scenario import Scenario
from epfuzz.sim.engine import SimRun, build
from epfuzz.sim.memory import Memory
from epfuzz.sim.nic import Packet, Tlp
from epfuzz.sim.nvlink import pass_rule
from epfuzz.sim.pcie import PassRule

MAX_UNITS_PER_EPOCH = 48


@dataclass
class Exploration:
    violation: Violation | None
    states: int
    order: list[int]          # seqs of the violating order's prefix (empty if none)


def _units(tlps: list[Tlp]) -> list[Tlp]:
    out: list[Tlp] = []
    for t in tlps:
        while t.n > 1:
            head, t = t.split(1)
            out.append(head)
        out.append(t)
    return out


MAX_AR_PACKETS = 7


def explore(scn: Scenario, proto: Protocol | None = None, max_states: int = 500_000) -> Exploration:
    """Every allowed PCIe visibility order; with adaptive routing on, for every packet arrival order too."""
    proto = proto or get_protocol(scn.protocol)
    if proto.flush_on_accept or (proto.release_at_accept and scn.faults.rx_lag):
        raise InputError(f"exhaustive exploration does not model {scn.protocol}'s flush or read lag yet; "
                         "use epfuzz run or fuzz it")
    base = scn.replace(schedule=())
    if not scn.knobs.adaptive_routing:
        return _explore_run(build(base, proto), scn, proto, max_states)
    pkts = build(base, proto).packets
    epochs = sorted({p.epoch for p in pkts})
    per_epoch = [[p for p in pkts if p.epoch == e] for e in epochs]
    if max(len(g) for g in per_epoch) > MAX_AR_PACKETS:
        raise InputError(f"too many packets per epoch to enumerate adaptive-routing orders "
                         f"(limit {MAX_AR_PACKETS})")
    states = 0
    for combo in itertools.product(*(itertools.permutations(range(len(g))) for g in per_epoch)):
        perms = [list(c) for c in combo]

        def arrival(ps: list[Packet], perms: list[list[int]] = perms) -> list[Packet]:
            out: list[Packet] = []
            for e, perm in zip(epochs, perms):
                group = [p for p in ps if p.epoch == e]
                out += [group[i] for i in perm]
            return out

        res = _explore_run(build(base, proto, arrival), scn, proto, max_states - states)
        states += res.states
        if res.violation is not None:
            return Exploration(res.violation, states, res.order)
    return Exploration(None, states, [])


def _explore_run(run: SimRun, scn: Scenario, proto: Protocol, max_states: int) -> Exploration:
    mem = Memory(run.layout)
    rx = proto.receiver(scn, run.layout)
    budget = [max_states]
    states = 0
    for epoch in range(scn.payload.epochs):
        units = _units([t for t in run.tlps if t.epoch == epoch])
        if len(units) > MAX_UNITS_PER_EPOCH:
            raise InputError(f"scenario too large to explore exhaustively ({len(units)} TLPs in epoch {epoch}, "
                             f"limit {MAX_UNITS_PER_EPOCH})")
        mem.start_epoch(epoch, poison=proto.poison, reset=proto.reset_signals)
        rx.start_epoch(epoch)
        start = rx.state()
        v, path, n = _explore_epoch(scn, units, epoch, mem, rx, budget, pass_rule(scn, run.packets))
        states += n
        if v is not None:
            return Exploration(v, states, path)
        # carry the epoch's end state into the next one (arrival order; disjoint writes commute)
        rx.restore(start)
        for t in units:
            mem.apply(t)
            if t.region in rx.watch:
                rx.poll(mem, epoch)
    return Exploration(None, states, [])


def _explore_epoch(scn: Scenario, units: list[Tlp], epoch: int, mem: Memory, rx: Receiver,
                   budget: list[int], can_pass: PassRule) -> tuple[Violation | None, list[int], int]:
    lay = mem.layout
    window = scn.knobs.reorder_window
    n = len(units)
    # blocked_by[i]: bit j set if unit i may not become visible while earlier unit j is pending
    blocked_by = [0] * n
    for i, t in enumerate(units):
        for j in range(i):
            e = units[j]
            if t.seq - e.seq > window or can_pass(t, e) is None:
                blocked_by[i] |= 1 << j
    seen: set[tuple[object, ...]] = set()
    path: list[int] = []
    full = (1 << n) - 1
    local_mask = sum(1 << i for i, t in enumerate(units) if t.local)  # receiver polls after its own stores

    def dfs(mask: int) -> Violation | None:
        key = (mask, rx.state(), mem.regions[ops.SIGNAL].tobytes(), mem.regions[ops.CQ].tobytes())
        if key in seen:
            return None
        seen.add(key)
        budget[0] -= 1
        if budget[0] < 0:
            raise InputError("exhaustive exploration exceeded its state budget")
        if mask == full:
            if not rx.done():
                return Violation("hang", scn.protocol, epoch, -1, "not every channel saw its final signal")
            return None
        pending = full & ~mask
        for i in range(n):
            if not (pending >> i) & 1 or blocked_by[i] & pending:
                continue
            t = units[i]
            snap = mem.snapshot()
            rstate = rx.state()
            mem.apply(t)
            path.append(t.seq)
            v = None
            if t.region in rx.watch and (mask | (1 << i)) & local_mask == local_mask:
                for c in rx.poll(mem, epoch):
                    expected = mem.expected if c.region == ops.DATA else None
                    v = check(c, mem.regions[c.region], expected, lay, scn.protocol, epoch)
                    if v is not None:
                        v.trigger, v.position = t.seq, len(path)
                        break
            if v is None:
                v = dfs(mask | (1 << i))
            if v is not None:
                return v
            path.pop()
            mem.restore(snap)
            rx.restore(rstate)
        return None

    v = dfs(0)
    return v, list(path), len(seen)
