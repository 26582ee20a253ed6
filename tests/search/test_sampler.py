"""The PCT-style schedule sampler: events, not units, and a mutator move that keeps the configuration."""

from __future__ import annotations

import random

from epfuzz.continuous.seeds import SEED_661
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.search.sampler import SamplerSearch, mutate_schedule, sample_schedule
from epfuzz.sim.engine import simulate


def test_schedule_has_one_to_three_change_points_that_reorder():
    scn = codec.load_dict({**SEED_661, "schedule": []})
    proto = get_protocol(scn.protocol)
    rng = random.Random(1)
    reordered = 0
    for _ in range(50):
        sched = sample_schedule(scn, proto, rng)
        assert 1 <= len(sched) <= 3
        run = simulate(scn.replace(schedule=sched), proto)
        reordered += bool(run.tlp_inversions)
    assert reordered >= 25   # RO data and an RO atomic: most change points move something


def test_sampler_picks_the_single_signal_tlp_often():
    """One atomic among 57 data TLPs: uniform units would pick it ~1/58 of the time."""
    scn = codec.load_dict({**SEED_661, "schedule": [], "chunking": {"max_payload": 128}})
    proto = get_protocol(scn.protocol)
    rng = random.Random(2)
    hits = sum(simulate(scn.replace(schedule=sample_schedule(scn, proto, rng, depth=1)), proto).violation is not None
               for _ in range(200))
    assert hits >= 20, hits


def test_mutator_move_keeps_the_configuration():
    proto = get_protocol("deep_gdr")
    rng = random.Random(3)
    data = codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": 3},
                               "topology": {"num_channels": 2}})
    data = codec.encode(data)
    before = codec.decode(data, "deep_gdr")
    after = codec.decode(mutate_schedule(data, "deep_gdr", proto, rng), "deep_gdr")
    assert after.schedule and after.replace(schedule=()) == before.replace(schedule=())


def test_sampler_alone_is_reproducible():
    proto = get_protocol("deep_gdr")
    a = [SamplerSearch("deep_gdr", proto, 7).next_scenario() for _ in range(1)]
    b = [SamplerSearch("deep_gdr", proto, 7).next_scenario() for _ in range(1)]
    assert a == b


def test_orders_kept_move_by_move_are_the_whole_schedules_order():
    """The sampler adds one change point at a time to the order the earlier ones made (`_Orders`) instead of
    applying the whole schedule to arrival order again: the two must be the same order, unit for unit, on
    both stages (net overtakes need adaptive routing), with kept schedules and their cached orders."""
    from epfuzz.search import sampler
    from epfuzz.sim.adversary import QpStreams, apply_overtakes
    from epfuzz.sim.engine import NET_WINDOW, build
    from epfuzz.sim.pass_rules import packet_pass_rule, tlp_pass_rule

    rng = random.Random(8)
    proto = get_protocol("dispatch_any")
    checked = 0
    for _ in range(40):
        scn = codec.decode(rng.randbytes(rng.randrange(20, 129)), "dispatch_any")
        run = build(scn.replace(schedule=()), proto)
        moves: dict[str, list[tuple[int, int]]] = {"pcie": [], "net": []}
        for stage in ("pcie", "net"):
            moves[stage] = [(rng.randrange(65536), rng.randint(1, 64)) for _ in range(rng.randrange(0, 6))]
        orders = sampler._Orders(run, scn, moves)
        for _ in range(6):
            stage = rng.choice(("pcie", "net"))
            got = orders.order(stage)
            if stage == "net":
                want, _ = apply_overtakes(run.packets, moves["net"], packet_pass_rule(True), NET_WINDOW)
            else:
                w = scn.knobs.reorder_window
                want, _ = apply_overtakes(run.tlps, moves["pcie"], tlp_pass_rule(), w, QpStreams(run.tlps, w))
            assert [(x.seq, x.n) for x in got] == [(x.seq, x.n) for x in want]
            checked += len(moves[stage])
            moves[stage].append((rng.randrange(65536), rng.randint(1, 64)))
    assert checked > 200


def test_position_counts_units_in_the_current_order():
    """`schedcore.position` (compiled): a unit's index in an order of runs, counted in units; 0 if absent."""
    from types import SimpleNamespace as R

    from epfuzz.search.schedcore import position

    order = [R(seq=5, n=3), R(seq=0, n=5), R(seq=8, n=1)]      # units 5-7, then 0-4, then 8
    assert [position(order, u) for u in range(9)] == [3, 4, 5, 6, 7, 0, 1, 2, 8]
    assert position(order, 9) == 0 and position([], 0) == 0


def _marked_reference(run):
    """`sampler._marked`'s loop as first written (plain Python), the reference for the compiled one."""
    from epfuzz.search.feedbacks import reads_of

    r = reads_of(run)
    tb = run.layout.token_bytes
    out = []
    for t in run.tlps:
        if t.local:
            continue
        if t.seq in r.triggers or t.region in r.watched:
            out.append(t)
            continue
        lo, hi = t.off, t.off + max(t.length, 1)
        for a, b in r.ranges.get((t.epoch, t.region), ()):
            if lo < b and a < hi and (lo <= a or hi >= b or (tb and ((lo - a) % tb == 0 or (hi - a) % tb == 0))):
                out.append(t)
                break
    return out


def test_marked_tlps_equal_the_plain_loop():
    """`featcore.marked_tlps` (compiled) picks the very TLPs of the loop it replaced, on runs with polls."""
    from epfuzz.protocols.deep import DEEP_ZOO
    from epfuzz.search.featcore import marked_tlps

    rng = random.Random(31)
    checked = 0
    for _, _, bad, _ in DEEP_ZOO:
        proto = get_protocol(bad)
        for _ in range(6):
            run = simulate(codec.decode(rng.randbytes(rng.randrange(20, 90)), bad).replace(schedule=()), proto)
            if run.polls:
                assert [id(t) for t in marked_tlps(run)] == [id(t) for t in _marked_reference(run)]
                checked += 1
    assert checked >= 20
