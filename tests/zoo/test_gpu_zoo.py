"""Issue 30's GPU-side pairs (epfuzz/protocols/gpu2026.py, the sender-side source layer): each bad form is found
from nothing with a fixed seed within a bounded budget (the schedule sampler, the harness's search) and by
exhaustive exploration of a small shape; each fixed form stays clean under the sampler and random inputs, and
exploration proves the small shape clean under every platform setting. The 100,000-execution runs:
bench/fixed_budget.md."""

from __future__ import annotations

import random
from typing import Any

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol, gpu2026
from epfuzz.search.sampler import SamplerSearch
from epfuzz.sim.engine import simulate
from epfuzz.triage.explain import explain
from tests.zoo.family import Bad, Family, scenario

_W = {"reorder_window": 4}
#: sampler budgets: executions to the first finding with seed 1 measured (December 2026: 1 and 0), at least
#: 100; each pair under the preset it is about (the harness's --preset / EPFUZZ_PRESET), spec where not named;
#: the smallest shapes that show each bad form (the stale quiet needs packets made after the clear: a token
#: of two 4 KiB packets); the source-layer bugs are in the bytes the NIC carried, so arrival order shows
#: them (and `explain` names the clause); the TMA flag needs the flag to overtake the data
FAMILY = Family(gpu2026.PAIRS, {
    "stale_quiet": Bad(1, 100, "stale-accept", {"knobs": _W, "payload": {"num_tokens": 1, "hidden_bytes": 7168}},
                       clause="SRC-overwrite", in_arrival_order=True),
    "source_no_flush": Bad(1, 100, "stale-accept", {"knobs": _W, "payload": {"num_tokens": 2}},
                           clause="SRC-unflushed", in_arrival_order=True),
    "tma_flag": Bad(1, 100, "stale-accept", {"preset": "nvlink", "knobs": {"reorder_window": 64},
                                             "payload": {"num_tokens": 2, "hidden_bytes": 512},
                                             "chunking": {"max_payload": 128}},
                    clause="NV-async-proxy", preset="nvlink"),
    "ro_only_strict_mr": Bad(1, 100, "stale-accept", {"preset": "mlx5-ro-only", "knobs": _W,
                                                      "payload": {"num_tokens": 2}},
                             clause="C2b", preset="mlx5-ro-only"),
    "mixed_plane": Bad(1, 100, "stale-accept", {"preset": "mixed-nvlink-rdma", "knobs": _W,
                                                "payload": {"num_tokens": 2}, "topology": {"num_channels": 2}},
                       clause="MIX-device-scope", preset="mixed-nvlink-rdma"),
}, proof_tokens=(1, 2, 3))
globals().update(FAMILY.tests())
SMALL = {bad: b.small for bad, b in FAMILY.bads.items()}


def _scn(name: str, shape: dict[str, Any], **knobs: Any) -> Any:
    return scenario(name, shape, **knobs)


def test_stale_quiet_differs_from_its_fix_in_the_quiet_alone_and_needs_a_packet_after_the_clear():
    """The bad form is the fixed one with `Flush(stale=True)`; a token of one small packet is made before the
    clear is reached (the NIC read it in time), so it is clean even with the stale quiet."""
    bad, fixed = get_protocol("stale_quiet"), get_protocol("stale_quiet_fixed")
    scn = _scn("stale_quiet", SMALL["stale_quiet"])
    lay = bad.layout(scn)
    b, f = bad.sender(scn, lay, 0)[0], fixed.sender(scn, lay, 0)[0]
    assert [op for op in b if not isinstance(op, ops.Flush)] == [op for op in f if not isinstance(op, ops.Flush)]
    assert [op.stale for op in b if isinstance(op, ops.Flush)] == [True]
    assert [op.stale for op in f if isinstance(op, ops.Flush)] == [False]
    small = _scn("stale_quiet", {"knobs": _W, "payload": {"num_tokens": 1, "hidden_bytes": 16}})
    assert simulate(small, bad).violation is None


def test_a_relaxed_source_flush_is_no_fix():
    """aorta #205: the fix needs the flush without relaxed ordering; the same sender with a relaxed flush is
    found (SRC-flush-ro)."""
    from epfuzz.protocols.gather import PathProtocol
    from epfuzz.protocols.gpu2026 import _receiver, _store_sender

    fixed = get_protocol("source_no_flush_fixed")
    ro = PathProtocol("source_ro_flush", "the fix with a relaxed flush", dict(fixed.fixed), "finding", (),
                      _store_sender(True, relaxed=True), _receiver)
    scn = _scn("source_no_flush_fixed", SMALL["source_no_flush"])
    assert simulate(scn, fixed).violation is None
    run = simulate(scn, ro)
    assert run.violation is not None and {p.stale for p in run.packets if p.stale} == {"SRC-flush-ro"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["stale_quiet", "source_no_flush"])
def test_not_reachable_under_nvlink_when_fenced(name):
    """platform_expect.BREADTH_NVLINK: under nvlink no NIC reads a send buffer (the source layer is off); with a
    system-scope fence the bad forms are clean, like the RDMA bugs."""
    from dataclasses import replace

    from epfuzz.protocols.platform_expect import BREADTH_NVLINK
    from epfuzz.search.sampler import sample_schedule

    assert name in BREADTH_NVLINK["rdma bug"]
    rng = random.Random(5)
    proto = get_protocol(name)
    for _ in range(300):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 129)), name, "nvlink")
        scn = scn.replace(gpu=replace(scn.gpu, fence="threadfence_system", path="p2p"))
        scn = scn.replace(schedule=sample_schedule(scn, proto, rng))
        assert simulate(scn, proto).violation is None, scn.to_json(None)


def test_tma_flag_differs_from_its_fix_in_the_proxy_fence_alone_and_only_the_gpu_runs_it():
    """verbs refuses it; the cuda interpreter encodes it (cp.async.bulk and fence.proxy.async on sm_90)."""
    from epfuzz.backends import verbs
    from epfuzz.backends.cuda_prog import OP_PFENCE, OP_TMA, encode_programs

    bad, fixed = get_protocol("tma_flag"), get_protocol("tma_flag_fixed")
    scn = _scn("tma_flag", SMALL["tma_flag"])
    lay = bad.layout(scn)
    b, f = bad.sender(scn, lay, 0)[0], fixed.sender(scn, lay, 0)[0]
    assert [op for op in f if not isinstance(op, ops.ProxyFence)] == b and f[-2] == ops.ProxyFence()
    assert all(op.tma for op in b if isinstance(op, ops.Write))
    for proto in (bad, fixed):
        assert "TMA" in verbs.refusal(scn, proto)
        codes = set(encode_programs(proto, scn, lay)[:, :, 0].ravel().tolist())
        assert OP_TMA in codes and (OP_PFENCE in codes) == (proto is fixed)


def test_ro_only_the_fix_is_the_strong_flag_alone_and_explain_names_the_device_clause():
    bad, fixed = get_protocol("ro_only_strict_mr"), get_protocol("ro_only_strict_mr_fixed")
    scn = _scn("ro_only_strict_mr", SMALL["ro_only_strict_mr"])
    lay = bad.layout(scn)
    b, f = bad.sender(scn, lay, 0)[0], fixed.sender(scn, lay, 0)[0]
    assert b[:-1] == f[:-1] and not b[-1].strong and f[-1].strong
    search = SamplerSearch("ro_only_strict_mr", bad, 1, "mlx5-ro-only")
    for _ in range(100):
        s = search.next_scenario()
        if simulate(s, bad).violation is not None:
            lines = explain(s, bad).overtakes
            assert any(line.startswith("C2b:") and "RO-only-key" in line for line in lines), lines
            return
    pytest.fail("no finding in 100")
