"""Exhaustive exploration: every visibility order the rule table allows, for small scenarios.

The fuzzer samples schedules; this enumerates them, so "unreachable" can be a
proof for a given scenario rather than an absence of luck. Depth-first over
"which pending TLP becomes visible next", merging states that are equal for the
receiver (same visible set, same signal/CQ bytes, same receiver state): TLPs that
write disjoint data bytes commute, so the visible set determines the data region.
With adaptive routing on, every packet arrival order (per epoch) is enumerated
too, for scenarios of at most MAX_AR_PACKETS packets per epoch.

The DFS is one scheduler over the replay's own receiver step (`Receiving.land`),
as shuttle's DFS is one scheduler among others: the flush before reading data and
the read lag (`faults.rx_lag`) are modelled exactly as in `simulate`, and what the
receiver is still reading or waiting on is part of the merged state. Between
epochs the end state of arrival order is carried over (one of the orders just
explored, all clean), so a read lag reaching into the next epoch is explored
from that one end state only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from epfuzz.errors import InputError
from epfuzz.oracle import Violation
from epfuzz.protocols.base import Protocol
from epfuzz.scenario import Scenario
from epfuzz.sim.engine import SimRun, build
from epfuzz.sim.packets import Packet, Tlp
from epfuzz.sim.pass_rules import tlp_pass_rule
from epfuzz.sim.receive import Receiving

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


def explore(scn: Scenario, proto: Protocol, max_states: int = 500_000) -> Exploration:
    """Every allowed PCIe visibility order; with adaptive routing on, for every packet arrival order too."""
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
    per_epoch = [_units([t for t in run.tlps if t.epoch == e]) for e in range(scn.payload.epochs)]
    step = Receiving(scn, proto, run.layout, [u for units in per_epoch for u in units])
    budget = [max_states]
    states = 0
    for epoch, units in enumerate(per_epoch):
        if len(units) > MAX_UNITS_PER_EPOCH:
            raise InputError(f"scenario too large to explore exhaustively ({len(units)} TLPs in epoch {epoch}, "
                             f"limit {MAX_UNITS_PER_EPOCH})")
        step.start_epoch(epoch)
        start = step.state()
        v, path, n = _explore_epoch(scn, units, step, budget)
        states += n
        if v is not None:
            return Exploration(v, states, path)
        # carry the epoch's end state into the next one: arrival order is one of the orders
        # just explored, all clean, and disjoint writes commute
        step.restore(start)
        for i, t in enumerate(units):
            step.land(t, i + 1)
    return Exploration(None, states, [])


def _blocked_by(scn: Scenario, units: list[Tlp]) -> list[int]:
    """Bit j of entry i: unit i may not become visible while earlier unit j is pending."""
    window = scn.knobs.reorder_window
    can_pass = tlp_pass_rule()
    out = [0] * len(units)
    for i, t in enumerate(units):
        for j in range(i):
            e = units[j]
            if t.seq - e.seq > window or can_pass(t, e) is None:
                out[i] |= 1 << j
    return out


def _explore_epoch(scn: Scenario, units: list[Tlp], step: Receiving,
                   budget: list[int]) -> tuple[Violation | None, list[int], int]:
    """Depth first over "which pending unit becomes visible next": one scheduler of `step.land`."""
    n = len(units)
    blocked_by = _blocked_by(scn, units)
    seen: set[tuple[object, ...]] = set()
    path: list[int] = []
    full = (1 << n) - 1
    mem = step.mem

    def dfs(mask: int) -> Violation | None:
        key = (mask, step.key())
        if key in seen:
            return None
        seen.add(key)
        budget[0] -= 1
        if budget[0] < 0:
            raise InputError("exhaustive exploration exceeded its state budget")
        if mask == full:
            return step.close(-1)
        pending = full & ~mask
        for i in range(n):
            if not (pending >> i) & 1 or blocked_by[i] & pending:
                continue
            t = units[i]
            snap = mem.snapshot()
            state = step.state()
            path.append(t.seq)
            v = step.land(t, len(path))
            if v is None:
                v = dfs(mask | (1 << i))
            if v is not None:
                return v
            path.pop()
            mem.restore(snap)
            step.restore(state)
        return None

    v = dfs(0)
    return v, list(path), len(seen)
