"""Overtakes follow the TLP they move when the shape shrinks (issues 26.2, 34.4)."""

from __future__ import annotations

from epfuzz.backends import get_backend
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build
from epfuzz.triage.minimize import minimize
from epfuzz.triage.readdress import VARIANTS, readdress

#: what the second wave's minimizer called minimized: 33 tokens, 107 TLPs, the one overtake at index
#: 60026 (60026 mod 107 = the signal TLP); any fewer tokens pointed the overtake at a data TLP
STUCK = {"protocol": "flag_write_signal", "knobs": {"nic_relaxed_ordering": True, "reorder_window": 1},
         "signal": {"at_end_only": True}, "schedule": [{"stage": "pcie", "index": 60026, "distance": 1}],
         "chunking": {"tokens_per_wr": 4, "splits_per_token": 3, "mtu": 512, "max_payload": 512},
         "payload": {"hidden_bytes": 433, "scale_bytes": 337, "meta_bytes": 33, "num_tokens": 33}}


def test_the_stuck_case_shrinks_to_one_token_and_two_tlps():
    scn = codec.load_dict(STUCK)
    proto = get_protocol(scn.protocol)
    assert get_backend("sim").run(scn, proto).violation is not None
    r = minimize(scn, proto).result
    assert r.payload.num_tokens == 1 and sum(t.n for t in build(r, proto).tlps) == 2
    assert len(r.schedule) == 1 and r.schedule[0].index < 2


def test_readdressing_keeps_the_signal_overtake_when_tokens_go():
    scn = codec.load_dict(STUCK)
    proto = get_protocol(scn.protocol)
    old = build(scn, proto)
    smaller = scn.replace(payload=scn.payload.__class__(**{**scn.to_dict()["payload"], "num_tokens": 2}))
    assert get_backend("sim").run(smaller, proto).violation is None  # the index names a data TLP now
    moved = readdress(old, smaller, proto, VARIANTS[0])
    assert moved is not None
    run = build(moved, proto)
    units = [(t.region, t.seq + k) for t in run.tlps for k in range(t.n)]
    assert units[moved.schedule[0].index][0] == "signal"  # "the signal after the last token", still
    assert get_backend("sim").run(moved, proto).violation is not None


def test_nothing_to_map_onto_is_no_candidate():
    scn = codec.load_dict({**STUCK, "payload": {**STUCK["payload"], "epochs": 2, "num_tokens": 3}})
    proto = get_protocol(scn.protocol)
    epoch1 = [i for i, t in enumerate(u for t in build(scn, proto).tlps for u in [t] * t.n) if t.epoch == 1]
    late = scn.replace(schedule=(scn.schedule[0].__class__("pcie", epoch1[0], 1),))
    one_epoch = late.replace(payload=late.payload.__class__(**{**late.to_dict()["payload"], "epochs": 1}))
    for v in VARIANTS:  # epochs are ranked too: epoch 1 from the front has no counterpart in one epoch
        got = readdress(build(late, proto), one_epoch, proto, v)
        assert got is None or v[0] == "back"
