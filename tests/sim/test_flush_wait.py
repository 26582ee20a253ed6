"""A Flush completes only once its data has reached the responder, however busy the port (issue 34.3).

With two busy QPs sharing the port, the requester used to complete a WR at "ready + two
latencies", so a Flush returned while its data still queued at the port: the signal posted
after it, on another QP, could arrive first, and cross-QP bugs were blamed on plain timing
(no overtake at all) or on the wrong rule (a remainder-batch race across QPs read as A2b alone).
"""

from __future__ import annotations

import random

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Overtake, Scenario
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build, simulate
from epfuzz.sim.explore import explore
from epfuzz.sim.requester import BASE_LATENCY_NS
from epfuzz.triage.explain import explain
from tests.sim.test_reorder_window import witness_schedule

FLUSHING = ["flush_other_qp", "flush_other_qp_fixed", "deep_other_qp", "deep_other_qp_fixed", "deep_notify_qp",
            "deep_imm_other_qp", "deep_imm_other_qp_fixed"]


def _lat(scn: Scenario, qp: int) -> int:
    f = scn.faults
    return BASE_LATENCY_NS + f.port_delay_ns + (f.qp_delay_ns[qp] if qp < len(f.qp_delay_ns) else 0)


def test_a_flush_never_completes_before_the_acks_of_its_qps_earlier_wrs():
    rng = random.Random(343)
    flushes = 0
    for _ in range(300):
        name = rng.choice(FLUSHING)
        scn = codec.decode(rng.randbytes(rng.randrange(16, 96)), name)
        run = build(scn, get_protocol(name))
        for f in run.flushes:
            before = [p for p in run.packets if p.epoch == f.epoch and p.qp == f.qp and p.wr <= f.wr]
            if before:
                flushes += 1
                assert f.done >= max(p.arrive for p in before) + _lat(scn, f.qp), (scn.to_json(), f)
    assert flushes > 300


def _two_busy_qps() -> Scenario:
    """flush_other_qp, two channels on two QPs, 8 KiB tokens through a port at a quarter rate."""
    return codec.load_dict({"protocol": "flush_other_qp", "payload": {"num_tokens": 4, "hidden_bytes": 8192},
                            "topology": {"num_channels": 2, "num_qps": 2}, "signal": {"interval": 3},
                            "faults": {"port_rate_div": 4, "qp_delay_ns": [1000, 0]}})


def test_two_busy_qps_do_not_fake_a_timing_race():
    """Was a stale accept in arrival order (no overtake: "timing across QPs"). The Flush now waits
    for the data's ACK, so arrival order is safe, and the finding needs the signal's TLP to pass
    the flushed data across QPs, which explain names."""
    scn, proto = _two_busy_qps(), get_protocol("flush_other_qp")
    assert simulate(scn, proto).violation is None
    res = explore(scn, proto)
    assert res.violation is not None
    sched = witness_schedule(scn, proto, res.order)
    assert sched is not None
    found = scn.replace(schedule=sched)
    run = simulate(found, proto)
    assert run.violation is not None and "xQP" in run.culprit_rules()
    text = explain(found, proto).text()
    assert "Flush QP 0: waits for WR" in text and "(IB-ack: local completion)" in text
    assert "IB-local-only" in text


def test_the_remainder_race_across_qps_needs_the_cross_qp_pass():
    """deep_other_qp's remainder batch, signalled on the next QP after a flush: one trailer overtake
    (A2b) used to be enough, because the signal arrived before the data. It is not any more; the
    bug is still reachable, through the cross-QP pass it really needs."""
    proto = get_protocol("deep_other_qp")
    scn = codec.load_dict({"protocol": "deep_other_qp", "payload": {"num_tokens": 8},
                           "topology": {"num_channels": 2, "num_qps": 2}, "signal": {"interval": 3},
                           "knobs": {"nic_relaxed_ordering": True, "reorder_window": 64},
                           "faults": {"port_rate_div": 4, "qp_delay_ns": [1000, 0]}})
    for dist in (1, 8, 64):
        assert simulate(scn.replace(schedule=(Overtake("pcie", 919, dist),)), proto).violation is None
    res = explore(scn, proto)
    assert res.violation is not None and res.violation.kind == "stale-accept"
    sched = witness_schedule(scn, proto, res.order)
    if sched is not None:
        assert {"A2b", "xQP"} <= simulate(scn.replace(schedule=sched), proto).culprit_rules()


#: DeepEP #661's shape, three epochs of 15 tokens: in epoch 1 the fetch-and-add of token 3 (TLP 232) becomes
#: visible before token 2's (TLP 220); when 220 lands the tail reads 4 and slot 3 is accepted, woken by 220
_TWO_SIGNALS = {
    "protocol": "deepep_v2_dispatch", "preset": "mlx5-pci-atomic",
    "knobs": {"mr_relaxed": True, "nic_relaxed_ordering": True, "atomic_mode": 4, "reorder_window": 16},
    "signal": {"kind": "faa", "interval": 1},
    "schedule": [{"stage": "pcie", "index": 232, "distance": 37}, {"stage": "pcie", "index": 115, "distance": 33},
                 {"stage": "pcie", "index": 32, "distance": 4}, {"stage": "pcie", "index": 88, "distance": 16}],
    "chunking": {"tokens_per_wr": 1, "mtu": 4096, "max_payload": 512},
    "payload": {"hidden_bytes": 4746, "scale_bytes": 0, "meta_bytes": 62, "epochs": 3, "num_tokens": 15},
    "faults": {"spins": [{"channel": 0, "before_op": 28, "ns": 16016}, {"channel": 0, "before_op": 59, "ns": 34724},
                         {"channel": 0, "before_op": 32, "ns": 28}]},
}


def test_a_flush_read_is_ordered_after_everything_that_arrived_before_it():
    """The receiver's flush read (flush_on_accept) is issued when it looks, after TLP 232 had arrived, so
    after token 3's data (TLPs 221-231, arrived before 232). It was bounded by the waking TLP (220) and
    let slot 3 be read unfinished."""
    from epfuzz.protocols.dispatch import DispatchProtocol

    scn = codec.load_dict(_TWO_SIGNALS)
    plain = simulate(scn, get_protocol("deepep_v2_dispatch")).violation
    assert plain is not None and plain.epoch == 1      # without the flush read: slot 2, as 232 lands
    flushing = DispatchProtocol("deepep_v2_dispatch", "with a flush read before use", {}, "clean",
                                flush_on_accept=True)
    assert simulate(scn, flushing).violation is None


def test_the_read_after_a_flush_read_still_lasts_rx_lag_tlps():
    """early_credit_release with a flush read before use: the credit still goes back at the accept, and
    the read that follows the flush lasts `faults.rx_lag` TLPs, so the next call can overwrite it. The
    flush path used to skip the read (and with it this check): a flush 'fixed' early credit release."""
    from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol

    scn = codec.load_dict({"protocol": "early_credit_release", "payload": {"hidden_bytes": 16, "meta_bytes": 16,
                                                                           "epochs": 2, "num_tokens": 1},
                           "faults": {"rx_lag": 1}})
    assert explore(scn, get_protocol("early_credit_release")).violation is not None
    flushing = DispatchProtocol("early_credit_release", "with a flush read", dict(STRICT_SAME_QP), "finding",
                                release_at_accept=True, poison=False, flush_on_accept=True)
    v = explore(scn, flushing).violation
    assert v is not None and v.kind == "overwritten-while-read"
