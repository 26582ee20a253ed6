"""Quality tests, as Hypothesis pins its shrinker: what the #661 finding minimizes to, and what explain says."""

from __future__ import annotations

import pytest

from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.triage.explain import explain
from epfuzz.triage.minimize import minimize

#: a noisy DeepEP #661 finding, as a fuzzer would hand it over
BIG_661 = {
    "protocol": "deepep_v2_dispatch", "preset": "spec",
    "knobs": {"nic_relaxed_ordering": True, "atomic_mode": 4, "ido": True, "num_functions": 2,
              "reorder_window": 40},
    "signal": {"interval": 3},
    "schedule": [{"stage": "pcie", "index": 609, "distance": 30}, {"stage": "pcie", "index": 31, "distance": 50},
                 {"stage": "net", "index": 3, "distance": 2}, {"stage": "pcie", "index": 12, "distance": 7}],
    "topology": {"num_channels": 3, "num_qps": 2, "channel_qp": [1, 0, 1]},
    "chunking": {"tokens_per_wr": 2, "mtu": 1024, "max_payload": 256},
    "payload": {"hidden_bytes": 7168, "scale_bytes": 224, "meta_bytes": 96, "epochs": 2, "num_tokens": 9},
    "faults": {"spins": [{"channel": 1, "before_op": 2, "ns": 500}], "qp_delay_ns": [100, 900],
               "qp_rate_div": [2], "port_delay_ns": 50, "port_rate_div": 3},
}


@pytest.fixture(scope="module")
def minimized():
    scn = codec.load_dict(BIG_661)
    assert simulate(scn, get_protocol(scn.protocol)).violation is not None
    return minimize(scn, get_protocol(scn.protocol))


def test_661_minimizes_to_one_channel_one_qp_smallest_token(minimized):
    r = minimized.result
    assert r.topology.num_channels == 1 and r.topology.num_qps == 1
    assert r.payload.num_tokens == 1 and r.payload.epochs == 1
    assert (r.payload.hidden_bytes, r.payload.scale_bytes, r.payload.meta_bytes) == (16, 0, 16)
    assert len(r.schedule) == 1 and r.schedule[0].distance == 1
    assert r.faults.spins == () and r.faults.qp_delay_ns == () and r.faults.port_delay_ns == 0
    assert minimized.sizes()[1] < minimized.sizes()[0]


def test_661_explain_names_c2b_and_the_knob_set(minimized):
    e = explain(minimized.result, get_protocol(minimized.result.protocol))
    assert e.rule_cells == {"C2b"}
    needed = {k.split("(")[-1].split("=")[0] for k in e.knobs_needed}
    assert {"knobs.mr_relaxed", "knobs.atomic_mode", "knobs.hca_o920"} <= needed
    assert not any("signal.fence" in k for k in e.knobs_needed)
    assert e.method == "exhaustive"
    assert "C2b: AtomicOp(RO)" in e.text() and "passed MemWr(RO) of token 0" in e.text()


def test_explain_draws_a_picture(minimized, tmp_path):
    pytest.importorskip("matplotlib")
    from epfuzz.triage.plot import plot

    out = plot(explain(minimized.result, get_protocol(minimized.result.protocol)), tmp_path / "t.png")
    assert out.stat().st_size > 1000
