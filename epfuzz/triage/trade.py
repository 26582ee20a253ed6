"""Adaptive routing traded for the root complex: one missing fence is one bug, whichever reordered it.

A WR posted without the fence after an RDMA READ may take effect before the READ has read: the
root complex may make its TLP visible first (`IB-read-unfenced`), or, with adaptive routing on, its
packet may arrive first (`AR`). The fuzzer reaches that one mistake both ways, and each case was
minimized the way it was found: a case whose knob pass shrank `knobs.reorder_window` to 1, where the
root complex can no longer move the atomic past both the READ and the data, needed AR from then on,
and one missing fence was two bugs, `C2b+IB-read-unfenced` and `AR+C2b` (pip trial,
ReadNoFenceAtomicRO; `tests/triage/test_one_fence_one_bug.py`). The zoo's read_flush_unfenced, a flag WRITE
after a READ, was two the same way. Any pair of WRs of one QP that both the wire and the root complex may
reorder is the same story.

So a case whose finding rests on AR is also tried without it: the wire's moves become the root
complex's moves of the same packets' TLPs, its own overtakes re-addressed to the same TLPs
(`epfuzz.triage.readdress`), each as far as the rules allow, the window at its widest (a window or a
distance then shrinks again like any value). A trade is offered only where the sim shows the same range
accepted too early with the root complex moving every WR past the WR the wire moved it past: it
changes how a pair of WRs was reordered, never which pair, so another defect of the same protocol is
never traded in.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from epfuzz.infra.errors import EpfuzzError
from epfuzz.ir.fields import IntField
from epfuzz.ir.scenario import Overtake, Scenario, iter_leaf_fields
from epfuzz.model.oracle import Violation
from epfuzz.protocols.base import Protocol
from epfuzz.sim.engine import SimRun, build, simulate
from epfuzz.triage.readdress import VARIANTS, readdress

AR, WINDOW = "knobs.adaptive_routing", "knobs.reorder_window"


def _widest(path: str) -> int:
    """The largest value of a scenario field, or of an overtake's (`distance`)."""
    spec = dict(iter_leaf_fields(Overtake) if path == "distance" else iter_leaf_fields())[path]
    return spec.hi if isinstance(spec, IntField) else 0


def wire_pairs(run: SimRun) -> frozenset[tuple[int, int]]:
    """(WR moved, WR it passed) of each packet the wire moved ahead where the finding rests on adaptive
    routing (its culprit rules name `AR`); empty otherwise."""
    if run.violation is None or "AR" not in run.culprit_rules():
        return frozenset()
    return frozenset((a.wr, b.wr) for a, b, r in run.packet_inversions if r == "AR")


def _passes(run: SimRun) -> frozenset[tuple[int, int]]:
    return frozenset((a.wr, b.wr) for a, b, _ in run.tlp_inversions)


def _moved_ahead(first: SimRun, seqs: set[int]) -> list[Overtake]:
    """An overtake of each TLP of the packets `seqs`, as far as the rules allow (`first`: no schedule)."""
    out, index, far = [], 0, _widest("distance")
    for t in first.tlps:
        if t.pkt in seqs:
            out += [Overtake("pcie", index + k, far) for k in range(t.n)]
        index += t.n
    return out


def routing_traded(scn: Scenario, built: SimRun | None, now: SimRun | None, proto: Protocol | None,
                   fixed: dict[str, Any], valid: Callable[[dict[str, Any]], Scenario | None]) -> Iterator[Scenario]:
    """`scn` without adaptive routing, the wire's moves made by the root complex (see the module's
    docstring), where the sim shows the same WRs passing the same WRs; nothing where AR is pinned, off,
    or not what the finding rests on. `built` is `scn` built (what its overtakes index), `now` simulated."""
    if AR in fixed or not scn.knobs.adaptive_routing or built is None or now is None or proto is None:
        return
    pairs, where = wire_pairs(now), _where(now.violation)
    if not pairs or where is None:
        return
    try:
        seqs = {a.seq for a, _, r in built.packet_inversions if r == "AR"}
        window = scn.knobs.reorder_window if WINDOW in fixed else _widest(WINDOW)
        base = scn.replace(knobs=replace(scn.knobs, adaptive_routing=False, reorder_window=window), schedule=())
        ahead = _moved_ahead(build(base, proto), seqs)
    except EpfuzzError:
        return
    far = _widest("distance")
    schedules = [tuple(ahead)]
    for variant in VARIANTS:
        r = readdress(built, base, proto, variant)
        if r is not None:
            schedules.append(tuple(ahead) + tuple(Overtake("pcie", o.index, far) for o in r.schedule
                                                  if o.stage == "pcie"))
    tried: set[Any] = set()
    for sched in schedules:
        c = valid(base.replace(schedule=sched).to_dict()) if sched not in tried else None
        tried.add(sched)
        if c is not None and _same(c, proto, pairs, where):
            yield c


def _where(v: Violation | None) -> tuple[object, ...] | None:
    """What a finding accepted too early: its kind, epoch, channel and range."""
    return None if v is None else (v.kind, v.epoch, v.channel, v.region, v.offset, v.length)


def _same(c: Scenario, proto: Protocol, pairs: frozenset[tuple[int, int]], where: tuple[object, ...]) -> bool:
    """`c` shows the finding at the same place, with the root complex moving each WR of `pairs` past its other."""
    try:
        run = simulate(c, proto)
    except EpfuzzError:
        return False
    return _where(run.violation) == where and pairs <= _passes(run)


class Current(typing.Protocol):
    """What the trade reads of the minimizer's current case (`epfuzz.triage.passes.Ctx`)."""

    scn: Scenario
    proto: Protocol | None
    fixed: dict[str, Any]

    def run(self) -> Any: ...

    def simulated(self) -> Any: ...

    def valid(self, d: dict[str, Any]) -> Scenario | None: ...


def trade_ar(ctx: Current) -> Iterator[tuple[int, Scenario]]:
    """The minimizer's pass (`epfuzz.triage.passes.PASSES`), run after the shape shrinks (a small case is cheap to
    simulate) and before the knobs do (the window is then shrunk once, without AR)."""
    yield from ((0, c) for c in routing_traded(ctx.scn, ctx.run(), ctx.simulated(), ctx.proto, ctx.fixed, ctx.valid))
