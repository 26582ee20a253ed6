"""Exhaustive exploration: every visibility order the rule table allows, for a scenario.

The fuzzer samples schedules; this enumerates them, so "unreachable" can be a
proof for a given scenario rather than an absence of luck. It quantifies over
network and responder timing too: IB orders nothing across QPs, so TLPs of
different QPs may become visible in any interleaving, whatever the scenario's
per-QP delays and throttles (and whatever `reorder_window` says: the window
bounds how far the root complex moves a TLP past its own QP's earlier TLPs,
counted in that QP's stream, exactly as the engine's adversary counts it:
`epfuzz.sim.adversary.QpStreams`). What stays fixed is listed by `Exploration.bounds`. Depth-first over
"which pending TLP becomes visible next", merging states that are equal for the
receiver (same visible set, same signal/CQ bytes, same receiver state): TLPs that
write disjoint data bytes commute, so the visible set determines the data region.
Two reductions keep it linear where the rules leave no choice: "must precede" is
cut to its transitive reduction (an in-order chain of N TLPs offers one candidate,
not N to test), and backtracking undoes one TLP's bytes instead of copying memory.
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
import sys
from dataclasses import dataclass, field

from epfuzz.infra.errors import InputError
from epfuzz.ir.scenario import Scenario
from epfuzz.model.oracle import Violation
from epfuzz.protocols.base import Protocol, unhashable_state
from epfuzz.sim.adversary import PassRule
from epfuzz.sim.engine import SimRun, build
from epfuzz.sim.nvlink import pass_rule
from epfuzz.sim.packets import Packet, Tlp
from epfuzz.sim.pass_rules import known_arrived
from epfuzz.sim.receive import Receiving

#: a guard for the recursion depth, not a search bound: the state budget is what limits the search
MAX_UNITS_PER_EPOCH = 4096


@dataclass
class Exploration:
    violation: Violation | None
    states: int
    order: list[int]          # seqs of the violating order's prefix (empty if none)
    bounds: list[str] = field(default_factory=list)   # what the search held fixed (see `bounds`)


def bounds(scn: Scenario) -> list[str]:
    """The knobs that bound the search: an "unreachable" is a proof for every order except these."""
    k, f = scn.knobs, scn.faults
    out = [f"reorder_window={k.reorder_window}: a TLP passes at most that many earlier TLPs of its own QP "
           "(other QPs' TLPs: any order)"]
    out.append("adaptive_routing=on: every packet order per epoch" if k.adaptive_routing
               else "adaptive_routing=off: each QP's packets arrive in order (QPs interleave freely)")
    out.append("GPU post order as the scenario's spins, flushes and fences make it "
               "(faults.spins; per-QP delays and throttles are covered)")
    if f.rx_lag:
        out.append(f"rx_lag={f.rx_lag}: the receiver reads for {f.rx_lag} TLPs after accepting")
    if scn.payload.epochs > 1:
        out.append("each epoch starts from the previous one's end state in arrival order")
    return out


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
        res = _explore_run(build(base, proto), scn, proto, max_states)
        res.bounds = bounds(scn)
        return res
    pkts = build(base, proto).packets
    epochs = sorted({p.epoch for p in pkts})
    per_epoch = [[p for p in pkts if p.epoch == e] for e in epochs]
    most = max(len(g) for g in per_epoch)
    if most > MAX_AR_PACKETS:  # a raw finding often has far more; its minimized case seldom does (new-user trial)
        raise InputError(f"{most} packets in one epoch, too many to enumerate adaptive-routing orders (limit "
                         f"{MAX_AR_PACKETS}): minimize the case first (epfuzz minimize CASE -o SMALL.json) and "
                         "explore the minimized case")
    states = 0
    # nothing sent behind a completion arrives before what it needed (known_arrived): an epoch's orders are
    # filtered once, before the product (at most 5,040 each), in the order the product takes them, so the kept
    # combinations are the same, in the same order; filtered inside the product, each dropped combination cost
    # no state, and two epochs of fenced packets spent minutes in 5,040^2 checks before the budget counted one
    kept = [[list(c) for c in itertools.permutations(range(len(g))) if _fences_kept([g[i] for i in c])]
            for g in per_epoch]
    for combo in itertools.product(*kept):
        perms = list(combo)

        def arrival(ps: list[Packet], perms: list[list[int]] = perms) -> list[Packet]:
            out: list[Packet] = []
            for e, perm in zip(epochs, perms):
                group = [p for p in ps if p.epoch == e]
                out += [group[i] for i in perm]
            return out

        res = _explore_run(build(base, proto, arrival), scn, proto, max_states - states)
        states += res.states
        if res.violation is not None:
            return Exploration(res.violation, states, res.order, bounds(scn))
    return Exploration(None, states, [], bounds(scn))


def _fences_kept(order: list[Packet]) -> bool:
    """Whether every packet sent behind a completion (a READ's response, a Flush's ACK) arrives after the
    packets that completion needed (`epfuzz.sim.pass_rules.known_arrived`, what `packet_pass_rule` says)."""
    return not any(known_arrived(p, q) for i, p in enumerate(order) for q in order[i + 1:])


def _explore_run(run: SimRun, scn: Scenario, proto: Protocol, max_states: int) -> Exploration:
    per_epoch = [_units([t for t in run.tlps if t.epoch == e]) for e in range(scn.payload.epochs)]
    step = Receiving(scn, proto, run.layout, [u for units in per_epoch for u in units])
    budget = [max_states]
    states = 0
    for epoch, units in enumerate(per_epoch):
        if len(units) > MAX_UNITS_PER_EPOCH:
            raise InputError(f"scenario too large to explore ({len(units)} TLPs in epoch {epoch}, "
                             f"limit {MAX_UNITS_PER_EPOCH})")
        step.start_epoch(epoch)
        v = step.wake(0)
        if v is not None:
            return Exploration(v, states, [])
        start = step.state()
        v, path, n = _explore_epoch(scn, units, step, budget, pass_rule(scn, run.packets, run.wrs))
        states += n
        if v is not None:
            return Exploration(v, states, path)
        # carry the epoch's end state into the next one: arrival order is one of the orders
        # just explored, all clean, and disjoint writes commute
        step.restore(start)
        for i, t in enumerate(units):
            step.land(t, i + 1)
    return Exploration(None, states, [])


def _stream_positions(units: list[Tlp]) -> list[dict[int, int]]:
    """Per unit, how many of the epoch's units up to it belong to each QP's stream.

    A QP's stream is its own TLPs plus the receiver's local stores (which precede
    the epoch's traffic). The window is counted there: the arrival interleaving of
    QPs is timing, which exploration does not fix (the adversary's `QpStreams` is
    the same count, so a schedule reaches every order explored here).
    """
    qps = {u.qp for u in units if not u.local}
    count = dict.fromkeys(qps, 0)
    out = []
    for u in units:
        for q in qps:
            if u.local or u.qp == q:
                count[q] += 1
        out.append(dict(count))
    return out


def _blocked_by(scn: Scenario, units: list[Tlp], can_pass: PassRule) -> list[int]:
    """Bit j of entry i: unit i may not become visible while earlier unit j is pending."""
    window = scn.knobs.reorder_window
    pos = _stream_positions(units)
    out = [0] * len(units)
    for i, t in enumerate(units):
        for j in range(i):
            e = units[j]
            rule = can_pass(t, e)
            if rule == "xQP":
                continue
            dist = t.seq - e.seq if t.local else pos[i][t.qp] - pos[j][t.qp]
            if rule is None or dist > window:
                out[i] |= 1 << j
    return out


def _hasse(blocked_by: list[int]) -> tuple[list[list[int]], list[int]]:
    """Successor lists and predecessor counts of the transitive reduction of "must precede".

    A unit is blocked while some direct blocker is pending iff some reduced
    predecessor is: a pending blocker keeps everything between it and the unit
    pending. Chains (in-order TLPs) reduce to one edge per unit, so finding the
    enabled units costs the number of chains, not the number of units.
    """
    n = len(blocked_by)
    below = [0] * n   # every unit that must precede i, transitively
    succ: list[list[int]] = [[] for _ in range(n)]
    preds = [0] * n
    for i, direct in enumerate(blocked_by):
        implied = 0
        bits = direct
        while bits:
            low = bits & -bits
            implied |= below[low.bit_length() - 1]
            bits ^= low
        below[i] = direct | implied
        reduced = direct & ~implied
        while reduced:
            low = reduced & -reduced
            succ[low.bit_length() - 1].append(i)
            preds[i] += 1
            reduced ^= low
    return succ, preds


def _release(i: int, succ: list[list[int]], waiting: list[int], enabled: set[int]) -> None:
    """Unit i becomes visible: its successors wait for one predecessor fewer."""
    enabled.discard(i)
    for k in succ[i]:
        waiting[k] -= 1
        if not waiting[k]:
            enabled.add(k)


def _unrelease(i: int, succ: list[list[int]], waiting: list[int], enabled: set[int]) -> None:
    """Undo `_release` (depth-first backtracking)."""
    for k in succ[i]:
        if not waiting[k]:
            enabled.discard(k)
        waiting[k] += 1
    enabled.add(i)


def _explore_epoch(scn: Scenario, units: list[Tlp], step: Receiving, budget: list[int],
                   can_pass: PassRule) -> tuple[Violation | None, list[int], int]:
    """Depth first over "which pending unit becomes visible next": one scheduler of `step.land`."""
    n = len(units)
    succ, preds = _hasse(_blocked_by(scn, units, can_pass))
    enabled = {i for i in range(n) if not preds[i]}  # units whose every predecessor is visible
    waiting = list(preds)                            # predecessors still pending, per unit
    seen: set[tuple[object, ...]] = set()
    path: list[int] = []
    full = (1 << n) - 1
    regions = step.mem.regions

    def dfs(mask: int) -> Violation | None:
        key = (mask, step.key())
        try:
            if key in seen:
                return None
        except TypeError as e:  # only a plug-in receiver's state() can be unhashable
            raise unhashable_state(step.rx, scn.protocol, e) from None
        seen.add(key)
        budget[0] -= 1
        if budget[0] < 0:
            raise InputError("exhaustive exploration exceeded its state budget (--max-states); "
                             "a smaller reorder_window, fewer QPs or tokens bound the search")
        if mask == full:
            return step.close(-1)
        for i in sorted(enabled):
            t = units[i]
            # undo log: landing changes only the unit's own bytes (receivers read memory, never
            # write it), so save those rather than a snapshot of every region
            arr = regions[t.region]
            hi = t.off + max(t.length, 16)
            saved = arr[t.off:hi].copy()
            state = step.state()
            path.append(t.seq)
            _release(i, succ, waiting, enabled)
            v = step.land(t, len(path))
            if v is None:
                v = dfs(mask | (1 << i))
            if v is not None:
                return v
            _unrelease(i, succ, waiting, enabled)
            path.pop()
            arr[t.off:hi] = saved
            step.restore(state)
        return None

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 2 * n + 200))
    try:
        v = dfs(0)
    finally:
        sys.setrecursionlimit(limit)
    return v, list(path), len(seen)
