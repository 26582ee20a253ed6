"""The adversary never produces an order the rule table forbids; it can produce every allowed one."""

from __future__ import annotations

import random

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Overtake
from epfuzz.model.ordering import may_pass
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build
from epfuzz.sim.explore import _units

ANY = get_protocol("dispatch_any")  # every scenario here is dispatch_any's


def _stream_distance(run, later, earlier):
    """Units of `later`'s QP stream (its QP's TLPs and the receiver's stores) after `earlier`, up to `later`."""
    if later.local:
        return later.seq - earlier.seq
    units = [u for t in run.tlps for u in _units([t])]
    return sum(1 for u in units if earlier.seq < u.seq <= later.seq and (u.local or u.qp == later.qp))


def _check_order(run):
    units = [u for t in run.order for u in _units([t])]
    seen = []
    for u in units:
        for e in seen:
            assert e.seq < u.seq or e.epoch == u.epoch
        seen.append(u)
    for i, later in enumerate(units):
        for earlier in units[i + 1:]:
            if earlier.seq < later.seq:  # `later` overtook `earlier`
                assert later.epoch == earlier.epoch
                if later.qp != earlier.qp and not (later.local or earlier.local):
                    continue  # another QP's TLP: IB orders no QPs, the window counts none of them
                assert _stream_distance(run, later, earlier) <= run.scenario.knobs.reorder_window
                assert not (later.hold and later.qp == earlier.qp)
                if later.qp != earlier.qp or later.target != earlier.target:
                    continue  # no cross-QP order at the responder; no order across completers
                assert may_pass(later.attrs, earlier.attrs), (later, earlier)
                assert later.dep != earlier.seq


def test_random_schedules_respect_the_table():
    rng = random.Random(7)
    for _ in range(300):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 60)))
        s = codec.decode(data, "dispatch_any")
        moves = tuple(Overtake("pcie", rng.randrange(200), rng.randrange(1, 64)) for _ in range(6))
        run = build(s.replace(schedule=moves, payload=s.payload.__class__(num_tokens=2, hidden_bytes=1024)), ANY)
        _check_order(run)


def test_units_cover_every_byte_once():
    s = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 3, "hidden_bytes": 3000},
                            "chunking": {"max_payload": 256, "mtu": 1024},
                            "knobs": {"mr_relaxed": True, "nic_relaxed_ordering": True, "reorder_window": 64},
                            "schedule": [{"index": 5, "distance": 9}, {"index": 30, "distance": 20}]})
    run = build(s, ANY)
    data = sorted((t.off, t.length) for t in run.order if t.region == "data")
    pos = 0
    for off, length in data:
        assert off == pos
        pos += length
    assert sum(t.n for t in run.order) == sum(t.n for t in run.tlps)


def test_empty_schedule_is_arrival_order():
    s = codec.decode(b"\x05" * 40, "dispatch_any").replace(schedule=())
    run = build(s, ANY)
    assert [t.seq for t in run.order] == [t.seq for t in run.tlps]
