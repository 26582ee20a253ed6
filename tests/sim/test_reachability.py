"""The verdicts the core issue requires, by search (fuzz schedules) and by exhaustion."""

from __future__ import annotations

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.presets import PRESETS
from epfuzz.ir.scenario import Overtake
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore

ANY = get_protocol("dispatch_any")  # the protocol of small() unless a test names another


def small(protocol="dispatch_any", preset="spec", **sections):
    doc = {"protocol": protocol, "preset": preset,
           "payload": {"num_tokens": 2, "hidden_bytes": 2048},
           "chunking": {"max_payload": 1024},
           "knobs": {"reorder_window": 64}}
    for k, v in sections.items():
        doc.setdefault(k, {}).update(v)
    return codec.load_dict(doc)


RO_FAA = {"knobs": {"mr_relaxed": True, "nic_relaxed_ordering": True, "atomic_mode": 4},
          "signal": {"kind": "faa"}}


def test_ro_write_then_ro_faa_mode4_is_reachable_by_a_schedule():
    s = small(**RO_FAA)
    hits = [i for i in range(16) if simulate(s.replace(schedule=(Overtake("pcie", i, 8),)), ANY).violation]
    assert hits, "no single overtake exposed the C2b reordering"
    r = simulate(s.replace(schedule=(Overtake("pcie", hits[0], 8),)), ANY)
    assert "C2b" in r.rules_fired


def test_ro_write_then_ro_faa_mode4_is_reachable_exhaustively():
    assert explore(small(**RO_FAA), ANY).violation is not None


@pytest.mark.parametrize("change", [
    {"knobs": {"atomic_mode": 0}},
    {"knobs": {"mr_relaxed": False}},
    {"knobs": {"nic_relaxed_ordering": False}},
    {"knobs": {"hca_o920": True}},
])
def test_safe_variants_are_unreachable_for_every_schedule(change):
    doc = {k: dict(v) for k, v in RO_FAA.items()}
    for k, v in change.items():
        doc[k].update(v)
    res = explore(small(**doc), ANY)
    assert res.violation is None
    assert res.states > 10  # it really explored alternatives


def test_fixed_protocol_is_unreachable_for_every_schedule():
    s = small("deepep_v2_dispatch_fixed", "mlx5-pci-atomic")
    assert explore(s, get_protocol(s.protocol)).violation is None


@pytest.mark.parametrize("preset", sorted(p for p in PRESETS if PRESETS[p].model == "pcie"))
def test_signal_on_another_qp_without_fence_is_reachable_under_every_preset(preset):
    """Every NIC preset: the QP delay alone reorders arrivals (nvlink has no QPs: tests/rules/test_nvlink)."""
    s = small(preset=preset, topology={"num_qps": 2}, signal={"kind": "faa", "other_qp": True},
              faults={"qp_delay_ns": [3000]})
    assert simulate(s, get_protocol(s.protocol)).violation is not None


@pytest.mark.parametrize("ro", [False, True])
def test_write_with_imm_completion_is_unreachable(ro):
    s = small("write_imm_signal", knobs={"mr_relaxed": ro, "nic_relaxed_ordering": True, "atomic_mode": 4})
    assert explore(s, get_protocol(s.protocol)).violation is None


def test_write_with_imm_on_another_qp_is_reachable():
    s = small(signal={"kind": "write_imm", "other_qp": True}, topology={"num_qps": 2},
              faults={"qp_delay_ns": [3000]})
    assert simulate(s, get_protocol(s.protocol)).violation is not None


def test_fence_does_not_order_earlier_writes():
    """IBV_SEND_FENCE waits for earlier READ/ATOMIC only: C2b still applies."""
    s = small(knobs=RO_FAA["knobs"], signal={"kind": "faa", "fence": True})
    assert explore(s, get_protocol(s.protocol)).violation is not None


def test_ro_flag_write_is_reachable_and_strict_flag_write_is_not():
    ro = small(knobs={"mr_relaxed": True, "nic_relaxed_ordering": True}, signal={"kind": "write"})
    strict = small(knobs={"mr_relaxed": False}, signal={"kind": "write"})
    assert explore(ro, get_protocol(ro.protocol)).violation is not None
    assert explore(strict, get_protocol(strict.protocol)).violation is None


def test_adaptive_routing_reorders_a_flag_write_even_without_ro():
    s = small(knobs={"adaptive_routing": True}, signal={"kind": "write"})
    hits = [i for i in range(8) if simulate(s.replace(schedule=(Overtake("net", i, 4),)), ANY).violation]
    assert hits
    off = small(knobs={"adaptive_routing": False}, signal={"kind": "write"})
    assert not any(simulate(off.replace(schedule=(Overtake("net", i, 4),)), ANY).violation for i in range(8))


def test_stale_bytes_from_an_earlier_epoch_are_classified():
    s = small(**RO_FAA).with_path("payload.epochs", 2)
    for i in range(40):
        r = simulate(s.replace(schedule=(Overtake("pcie", i, 8),)), ANY)
        if r.violation and r.violation.epoch == 1:
            assert {c for _, c in r.violation.bad_chunks} <= {"poisoned", "stale"}
            return
    pytest.fail("no overtake in epoch 1 found")
