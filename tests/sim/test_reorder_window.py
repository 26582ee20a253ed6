"""`knobs.reorder_window` means one thing to the engine's adversary and to `explore` (issue 34.6).

The window bounds how many units of its own QP's stream (its QP's TLPs and the receiver's
stores) a TLP passes; another QP's TLPs interleave freely, because IB orders no QPs. At 0 a
fuzz run used to be clean where `explore` called the same scenario reachable: the engine
counted every TLP passed, of any QP, against the window. Both directions are checked here:
every order the engine makes is one `explore` allows, and every witness `explore` finds is
an order a schedule makes the engine follow.
"""

from __future__ import annotations

import random

from epfuzz.encoding import codec
from epfuzz.infra.errors import InputError
from epfuzz.ir.scenario import Overtake, Scenario
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build, simulate
from epfuzz.sim.explore import _blocked_by, _units, explore
from epfuzz.sim.nvlink import pass_rule


def witness_schedule(scn: Scenario, proto: object, order: list[int]) -> tuple[Overtake, ...] | None:
    """The pcie overtakes that put the units of `order` (seqs, a prefix) first, in that order: each
    moves from where it is to its place, passing exactly the units the witness puts after it. None
    when it needs more overtakes, or longer ones, than a schedule holds."""
    run = build(scn.replace(schedule=()), proto)  # type: ignore[arg-type]
    current = [u.seq for u in _units(run.tlps)]
    moves = []
    for k, seq in enumerate(order):
        p = current.index(seq)
        if p > k:
            moves.append(Overtake("pcie", p, p - k))
            current.insert(k, current.pop(p))
    if len(moves) > 16 or any(m.distance > 64 for m in moves):
        return None
    return tuple(moves)


def _cross_qp(window: int) -> Scenario:
    """Data on QP 0, WRITE_WITH_IMM on QP 1: a late signal in arrival order."""
    return codec.load_dict({"protocol": "dispatch_any", "preset": "spec",
                            "payload": {"num_tokens": 2, "hidden_bytes": 2048}, "chunking": {"max_payload": 1024},
                            "signal": {"kind": "write_imm", "other_qp": True}, "topology": {"num_qps": 2},
                            "faults": {"qp_delay_ns": [0, 5000]}, "knobs": {"reorder_window": window}})


def test_at_window_0_a_schedule_reaches_what_explore_calls_reachable():
    proto = get_protocol("dispatch_any")
    scn = _cross_qp(0)
    assert simulate(scn, proto).violation is None            # arrival order: the signal is late
    res = explore(scn, proto)
    assert res.violation is not None and res.violation.kind == "stale-accept"
    sched = witness_schedule(scn, proto, res.order)
    assert sched
    run = simulate(scn.replace(schedule=sched), proto)
    assert run.violation is not None and run.violation.kind == "stale-accept"
    assert run.culprit_rules() == {"xQP"}                    # the one pass it needs, free at window 0


def test_at_window_0_a_qp_keeps_its_own_order_on_both():
    """One QP, RO data and an RO fetch-and-add (C2b would let it pass): at window 0 the root complex
    moves nothing within the QP, so neither the engine nor `explore` reaches the stale accept."""
    proto = get_protocol("deepep_v2_dispatch")
    scn = codec.load_dict({"protocol": "deepep_v2_dispatch", "preset": "mlx5-pci-atomic",
                           "payload": {"num_tokens": 2, "hidden_bytes": 1024}, "knobs": {"reorder_window": 0}})
    assert explore(scn, proto).violation is None
    n = sum(t.n for t in build(scn, proto).tlps)
    for index in range(n):
        sched = (Overtake("pcie", index, 64),)
        assert simulate(scn.replace(schedule=sched), proto).violation is None
    assert explore(scn.with_path("knobs.reorder_window", 64), proto).violation is not None


def _small(rng: random.Random, name: str, window: int) -> Scenario:
    scn = codec.decode(bytes(rng.randrange(256) for _ in range(rng.choice([16, 32, 64]))), name)
    for path, value in (("payload.epochs", 1), ("payload.num_tokens", min(scn.payload.num_tokens, 3)),
                        ("knobs.adaptive_routing", False), ("knobs.reorder_window", window)):
        scn = scn.with_path(path, value)
    return scn


NAMES = ["dispatch_any", "flush_other_qp", "flag_write_signal", "write_imm_signal", "deepep_v2_dispatch"]


def test_engine_orders_are_orders_explore_allows():
    """Random schedules at windows 0, 1, 2, 8: every pass the engine makes is one `explore` leaves open."""
    rng = random.Random(346)
    checked = 0
    for _ in range(300):
        name = rng.choice(NAMES)
        proto = get_protocol(name)
        scn = _small(rng, name, rng.choice([0, 1, 2, 8]))
        sched = tuple(Overtake("pcie", rng.randrange(200), rng.randrange(1, 65)) for _ in range(rng.randrange(1, 5)))
        run = build(scn.replace(schedule=sched), proto)
        units = _units(run.tlps)
        if len(units) > 200:
            continue
        blocked = _blocked_by(scn, units, pass_rule(scn, run.packets))
        index = {u.seq: i for i, u in enumerate(units)}
        seen: set[int] = set()
        for t in run.order:
            for u in _units([t]):
                i = index[u.seq]
                pending_blockers = blocked[i] & ~sum(1 << index[s] for s in seen)
                assert not pending_blockers, (scn.to_json(), u.seq)
                seen.add(u.seq)
        checked += 1
    assert checked > 200


def test_explore_witnesses_replay_in_the_engine():
    """Random small scenarios at windows 0, 1, 2, 8: where `explore` finds an order, the schedule made
    from it finds the same kind of violation in the engine."""
    rng = random.Random(3461)
    replayed = 0
    for _ in range(400):
        name = rng.choice(NAMES)
        proto = get_protocol(name)
        scn = _small(rng, name, rng.choice([0, 1, 2, 8]))
        try:
            res = explore(scn, proto, max_states=3000)
        except InputError:
            continue
        if res.violation is None or res.violation.kind != "stale-accept":
            continue
        sched = witness_schedule(scn, proto, res.order)
        if sched is None:
            continue
        v = simulate(scn.replace(schedule=sched), proto).violation
        assert v is not None and v.kind == res.violation.kind, scn.to_json()
        replayed += 1
    assert replayed >= 20
