"""The `nvlink` preset's clauses (epfuzz.model.ordering.NVLINK_CLAUSES), one test each, at the rule and in the sim.

Each clause cites the PTX memory model (PTX ISA, "Memory Consistency Model") and the project's
measurement on the H200 pair (docs/backends.md, bench/cuda/litmus.jsonl); the sim tests check that
the clause reaches the verdict through the adversary: exhaustive exploration of a small scenario.
"""

from __future__ import annotations

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.presets import PLATFORM_FIELDS, PRESETS
from epfuzz.ir.scenario import Scenario
from epfuzz.model.ordering import NVLINK_CLAUSES, GpuAccess, GpuOp, gpu_signal_clause, nvlink_pass
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore

S, A = GpuAccess.STORE, GpuAccess.ATOMIC


def nv(protocol: str, fence: str = "none", store: str = "plain", path: str = "p2p", **sections) -> Scenario:
    doc = {"protocol": protocol, "preset": "nvlink",
           "payload": {"num_tokens": 2, "hidden_bytes": 512}, "chunking": {"max_payload": 128},
           "knobs": {"reorder_window": 64}, "gpu": {"fence": fence, "store": store, "path": path}}
    for k, v in sections.items():
        doc.setdefault(k, {}).update(v)
    return codec.load_dict(doc)


def reachable(scn: Scenario) -> bool:
    return explore(scn, get_protocol(scn.protocol)).violation is not None


def test_every_clause_cites_ptx_and_a_measurement():
    for c in NVLINK_CLAUSES.values():
        assert c.ptx and c.measured, c.name


def test_preset_pins_platform_fields_only_and_turns_off_nic_reordering():
    p = PRESETS["nvlink"]
    assert p.model == "nvlink" and set(p.fixed) <= PLATFORM_FIELDS
    assert p.fixed["knobs.adaptive_routing"] is False and p.fixed["knobs.hca_o920"] is False


# -- NV-weak: payload and flag stores are weak
def test_nv_weak_store_passes_the_ctas_earlier_store():
    assert nvlink_pass(GpuOp(S, "NV-weak"), GpuOp(S, "NV-weak")) == "NV-weak"


def test_nv_weak_unfenced_flag_store_is_reachable():
    assert gpu_signal_clause(S, "none", "plain", "p2p") == "NV-weak"
    assert gpu_signal_clause(S, "none", "volatile", "p2p") == "NV-weak"
    assert reachable(nv("flag_write_signal"))


# -- NV-relaxed-atomic: atomicAdd_system is relaxed unless fenced
def test_nv_relaxed_atomic_unfenced_faa_is_reachable():
    assert gpu_signal_clause(A, "none", "release_sys", "p2p") == "NV-relaxed-atomic"  # the store field is for flags
    assert nvlink_pass(GpuOp(A, "NV-relaxed-atomic"), GpuOp(S)) == "NV-relaxed-atomic"
    # the IB fix (an atomic on a strict MR) is not a fix on a GPU
    assert reachable(nv("flag_write_signal_fixed"))


# -- NV-gpu-scope: __threadfence does not order for the peer GPU
@pytest.mark.parametrize("path", ["p2p", "host"])
def test_nv_gpu_scope_device_fence_does_not_order_across_gpus(path):
    assert gpu_signal_clause(A, "threadfence", "plain", path) == "NV-gpu-scope"
    assert nvlink_pass(GpuOp(A, "NV-gpu-scope"), GpuOp(S)) == "NV-gpu-scope"
    assert reachable(nv("flag_write_signal_fixed", fence="threadfence", path=path))


# -- NV-fence-gpu-same: __threadfence orders on one GPU
def test_nv_fence_gpu_same_orders_within_one_gpu():
    assert gpu_signal_clause(A, "threadfence", "plain", "same") == "NV-fence-gpu-same"
    assert nvlink_pass(GpuOp(A, "NV-fence-gpu-same"), GpuOp(S)) is None
    assert not reachable(nv("flag_write_signal_fixed", fence="threadfence", path="same"))


# -- NV-fence-sys: __threadfence_system is an ordering point
@pytest.mark.parametrize("protocol", ["flag_write_signal", "flag_write_signal_fixed", "deepep_v2_dispatch"])
def test_nv_fence_sys_orders_the_signal_after_the_data(protocol):
    assert gpu_signal_clause(S, "threadfence_system", "plain", "p2p") == "NV-fence-sys"
    assert nvlink_pass(GpuOp(S, "NV-fence-sys"), GpuOp(S)) is None
    assert not reachable(nv(protocol, fence="threadfence_system"))


# -- NV-release-sys: st.release.sys orders the flag store
def test_nv_release_sys_orders_a_flag_store_only():
    assert gpu_signal_clause(S, "none", "release_sys", "p2p") == "NV-release-sys"
    assert not reachable(nv("flag_write_signal", store="release_sys"))
    assert reachable(nv("flag_write_signal_fixed", store="release_sys"))  # an atomic is not a store


# -- NV-cta: no order between CTAs, fenced or not
def test_nv_cta_strong_signal_passes_another_ctas_store():
    assert nvlink_pass(GpuOp(S, "NV-fence-sys", cta=1), GpuOp(S, cta=0)) == "NV-cta"


def test_nv_cta_shared_counter_is_reachable_even_fenced():
    """NVSHMEM #84: another channel's fenced add satisfies a channel's `counter >= k` before its data."""
    two = {"topology": {"num_channels": 2}}
    assert reachable(nv("shared_counter", fence="threadfence_system", **two))
    assert not reachable(nv("shared_counter_fixed", fence="threadfence_system", **two))


def test_issue_order_qp_delays_do_not_reorder_gpu_stores():
    """No NIC between SM and peer memory: a delayed QP does not let the signal arrive first."""
    s = nv("dispatch_any", fence="threadfence_system", topology={"num_qps": 2},
           signal={"kind": "faa", "other_qp": True}, faults={"qp_delay_ns": [3000]})
    assert simulate(s, get_protocol(s.protocol)).violation is None and not reachable(s)


def test_a_receivers_flush_read_orders_nothing_on_nvlink():
    """gdr_no_flush_fixed: the flush read fixes a PCIe path; a load does not order a peer GPU's weak
    stores (measured: 7 stale rounds in 50,000 of its unfenced form on the H200 pair)."""
    from epfuzz.ir.scenario import Overtake

    s = nv("gdr_no_flush_fixed")
    proto = get_protocol(s.protocol)
    hits = [i for i in range(32) if simulate(s.replace(schedule=(Overtake("pcie", i, 16),)), proto).violation]
    assert hits
    fenced = nv("gdr_no_flush_fixed", fence="threadfence_system")
    assert not any(simulate(fenced.replace(schedule=(Overtake("pcie", i, 16),)), proto).violation for i in range(32))


# -- NV-async-proxy / NV-proxy-fenced: TMA bulk stores and the generic-proxy release (NCCL 3f29db27)
def test_nv_async_proxy_a_system_release_does_not_order_tma_stores():
    tma = GpuOp(S, "NV-weak", tma=True, index=0)
    signal = GpuOp(A, "NV-fence-sys", index=3)
    assert nvlink_pass(signal, tma) == "NV-async-proxy"
    assert nvlink_pass(signal, GpuOp(S, "NV-weak", index=0)) is None       # a generic store: the release orders it
    assert nvlink_pass(GpuOp(S, "NV-weak", tma=True, index=4), tma) == "NV-weak"  # TMA stores among themselves
    assert nvlink_pass(GpuOp(A, "NV-relaxed-atomic", index=3), tma) == "NV-relaxed-atomic"  # its own clause first
    assert reachable(nv("tma_flag", fence="threadfence_system"))


def test_nv_proxy_fenced_a_proxy_fence_before_the_release_orders_them():
    assert not NVLINK_CLAUSES["NV-proxy-fenced"].may_pass
    fenced = GpuOp(S, "NV-weak", tma=True, index=0, fenced=2)
    assert nvlink_pass(GpuOp(A, "NV-fence-sys", index=3), fenced) is None
    assert nvlink_pass(GpuOp(A, "NV-fence-sys", index=1), fenced) == "NV-async-proxy"  # a signal before the fence
    from dataclasses import replace

    scn = nv("tma_flag_fixed", fence="threadfence_system")
    assert not reachable(scn)
    assert reachable(scn.replace(gpu=replace(scn.gpu, fence="none")))  # the proxy fence alone is no release


def test_tma_stores_are_rdma_writes_under_the_rdma_presets():
    scn = codec.load_dict({"protocol": "tma_flag", "payload": {"num_tokens": 2}, "knobs": {"reorder_window": 4}})
    assert explore(scn, get_protocol("tma_flag")).violation is None


def test_the_plugin_references_tma_sender_works_as_written():
    """docs/plugins.md, "TMA stores and the async proxy": with the ProxyFence the flag after a system fence is
    never seen before the data; without it, it can be."""
    from pathlib import Path
    from typing import Any

    from epfuzz.protocols.gather import GatherReceiver, PathProtocol

    page = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```python\n")[1:]]
    block = next(b for b in blocks if "ProxyFence()" in b)
    scn = nv("dispatch_any", fence="threadfence_system")
    for text, found in ((block, False), (block.replace(" ops.ProxyFence(),", ""), True)):
        ns: dict[str, Any] = {}
        exec(text, ns)  # noqa: S102 - the repository's own documentation
        proto = PathProtocol("tma", "the reference's sender", {}, "clean", (), ns["sender"],
                             lambda s, lay: GatherReceiver(s, lay, lambda w, c, e: w == 1))
        assert (explore(scn, proto).violation is not None) == found


# -- MIX-device-scope / MIX-fence-sys: the mixed NVLink + RDMA plane (DeepEP #715)
def _mixed(name: str, channels: int = 1) -> Scenario:
    return codec.load_dict({"protocol": name, "preset": "mixed-nvlink-rdma", "payload": {"num_tokens": 2},
                            "topology": {"num_channels": channels}, "knobs": {"reorder_window": 4}})


def test_mix_device_scope_an_rdma_signal_may_pass_the_nvlink_stores():
    from epfuzz.model.ordering import MIX_CLAUSES, mixed_pass

    assert MIX_CLAUSES["MIX-device-scope"].may_pass and mixed_pass(True, True, "threadfence") == "MIX-device-scope"
    assert mixed_pass(True, True, "none") == "MIX-device-scope"
    assert mixed_pass(False, True, "threadfence") is None and mixed_pass(True, False, "threadfence") is None
    assert reachable(_mixed("mixed_plane"))
    assert not reachable(_mixed("mixed_plane").replace(protocol="mixed_plane", preset="spec"))  # no plane: a WRITE


def test_mix_fence_sys_a_system_scope_fence_orders_them():
    from epfuzz.model.ordering import MIX_CLAUSES, mixed_pass

    assert not MIX_CLAUSES["MIX-fence-sys"].may_pass and mixed_pass(True, True, "threadfence_system") is None
    assert not reachable(_mixed("mixed_plane_fixed"))
    assert not reachable(_mixed("mixed_plane_fixed", 2))


def test_mix_only_same_node_peers_are_exposed():
    """Channel 1's peer is remote (RDMA data on the signal's QP, strict MR): its data cannot be passed; channel
    0's TMA stores can (found with one channel alone)."""
    proto = get_protocol("mixed_plane")
    scn = _mixed("mixed_plane", 2)
    progs = proto.sender(scn, proto.layout(scn), 0)
    from epfuzz.ir import ops

    assert [op.tma for op in progs[0] if isinstance(op, ops.Write)] == [True] * len(
        [op for op in progs[0] if isinstance(op, ops.Write)])
    assert not any(op.tma for op in progs[1] if isinstance(op, ops.Write))
