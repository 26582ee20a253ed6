"""Issue 30's GPU-side pairs (epfuzz/protocols/gpu2026.py, the sender-side source layer): each bad form is found
from nothing with a fixed seed within a bounded budget (the schedule sampler, the harness's search) and by
exhaustive exploration of a small shape; each fixed form stays clean under the sampler and random inputs, and
exploration proves the small shape clean under every platform setting. The 100,000-execution runs:
bench/fixed_budget.md."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import REGISTRY, get_protocol, gpu2026
from epfuzz.search.sampler import SamplerSearch
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore
from epfuzz.triage.explain import explain

ROOT = Path(__file__).resolve().parents[2]
#: bad -> (seed, budget, kind): executions to the first finding with seed 1 measured (December 2026: 1 and 0),
#: at least 100
SAMPLER = {"stale_quiet": (1, 100, "stale-accept"), "source_no_flush": (1, 100, "stale-accept"),
           "tma_flag": (1, 100, "stale-accept"), "ro_only_strict_mr": (1, 100, "stale-accept"),
           "mixed_plane": (1, 100, "stale-accept")}
#: the preset each pair is about (the harness's --preset / EPFUZZ_PRESET for its runs); spec where not named
PRESET = {"tma_flag": "nvlink", "ro_only_strict_mr": "mlx5-ro-only", "mixed_plane": "mixed-nvlink-rdma"}
FIXED_EXECS = 300
_W = {"reorder_window": 4}
#: the smallest shapes that show each bad form (the stale quiet needs packets made after the clear: a token of
#: two 4 KiB packets)
SMALL: dict[str, dict[str, Any]] = {
    "stale_quiet": {"knobs": _W, "payload": {"num_tokens": 1, "hidden_bytes": 7168}},
    "source_no_flush": {"knobs": _W, "payload": {"num_tokens": 2}},
    "tma_flag": {"preset": "nvlink", "knobs": {"reorder_window": 64}, "payload": {"num_tokens": 2, "hidden_bytes": 512},
                 "chunking": {"max_payload": 128}},
    "ro_only_strict_mr": {"preset": "mlx5-ro-only", "knobs": _W, "payload": {"num_tokens": 2}},
    "mixed_plane": {"preset": "mixed-nvlink-rdma", "knobs": _W, "payload": {"num_tokens": 2},
                    "topology": {"num_channels": 2}},
}
#: bad forms wrong in arrival order (the bytes the NIC carried); the TMA flag needs the flag to overtake the data
IN_ARRIVAL_ORDER = {"stale_quiet", "source_no_flush"}
PLATFORM = {"nic_relaxed_ordering": (False, True), "atomic_mode": (0, 4), "hca_o920": (False, True),
            "adaptive_routing": (False, True)}
#: the clause `explain` names in its overtakes for each bad form's finding
CLAUSE = {"stale_quiet": "SRC-overwrite", "source_no_flush": "SRC-unflushed", "tma_flag": "NV-async-proxy",
          "ro_only_strict_mr": "C2b", "mixed_plane": "MIX-device-scope"}


def _scn(name: str, shape: dict[str, Any], **knobs: Any) -> Any:
    shape = {**shape, "knobs": {**shape.get("knobs", {}), **knobs}}
    return codec.load_dict({"protocol": name, **shape})


def test_pairs_have_sources_harnesses_and_seeds():
    assert {bad for _, bad, _ in gpu2026.PAIRS} == set(SAMPLER) == set(SMALL)
    for _, bad, fixed in gpu2026.PAIRS:
        small = _scn(bad, SMALL[bad])
        assert REGISTRY.items[bad].expected(small) == "finding" and REGISTRY.items[fixed].expect == "clean"
        assert REGISTRY.items[fixed].expected(small.replace(protocol=fixed)) == "clean"
        for name in (bad, fixed):
            assert REGISTRY.items[name].sources, name
            assert (ROOT / "harnesses" / f"{name}_fuzzer.py").exists(), name
            assert any((ROOT / "corpus" / f"{name}_fuzzer").iterdir()), name


@pytest.mark.parametrize("bad", sorted(SAMPLER))
def test_bad_found_by_the_sampler_from_nothing(bad):
    seed, budget, kind = SAMPLER[bad]
    proto = get_protocol(bad)
    search = SamplerSearch(bad, proto, seed, PRESET.get(bad, "spec"))
    for _ in range(budget):
        scn = search.next_scenario()
        run = simulate(scn, proto)
        if run.violation is not None and CLAUSE[bad] in run.culprit_rules() | {p.stale for p in run.packets}:
            assert run.violation.kind == kind, run.violation.summary()
            lines = explain(scn, proto).overtakes
            assert any(line.startswith(CLAUSE[bad] + ":") for line in lines), lines
            return
    pytest.fail(f"{bad}: no finding in {budget} sampled executions (seed {seed})")


@pytest.mark.parametrize("bad", sorted(SMALL))
def test_small_shape_explored(bad):
    """The source-layer bugs are in the bytes the NIC carried, not in an order at the receiver: the small shape
    shows them with no overtake (and `explain` names the clause); the TMA flag needs an overtake."""
    scn = _scn(bad, SMALL[bad])
    proto = get_protocol(bad)
    run = simulate(scn, proto)
    assert (run.violation is not None) == (bad in IN_ARRIVAL_ORDER)
    if run.violation is not None:
        assert any(line.startswith(CLAUSE[bad] + ":") for line in explain(scn, proto).overtakes)
    found = explore(scn, proto, max_states=50_000)
    assert found.violation is not None and found.violation.kind == SAMPLER[bad][2]


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(SMALL))
def test_fixed_small_shape_proven_clean_on_every_platform(bad):
    fixed = f"{bad}_fixed"
    proto = get_protocol(fixed)
    from epfuzz.ir.presets import PRESETS

    pinned = {**PRESETS[PRESET.get(bad, "spec")].fixed, **proto.fixed}
    free = {k: v for k, v in PLATFORM.items() if f"knobs.{k}" not in pinned}
    for values in itertools.product(*free.values()):
        knobs = dict(zip(free, values))
        for tokens in (1, 2, 3):
            shape = {**SMALL[bad], "payload": {**SMALL[bad]["payload"], "num_tokens": tokens}}
            proof = explore(_scn(fixed, shape, **knobs), proto, max_states=400_000)
            assert proof.violation is None, (knobs, tokens, proof.violation.summary())


@pytest.mark.slow
@pytest.mark.parametrize(("bad", "fixed"), [p[1:] for p in gpu2026.PAIRS])
def test_fixed_clean_under_sampler_and_random(bad, fixed):
    proto, preset = get_protocol(fixed), PRESET.get(bad, "spec")
    search = SamplerSearch(fixed, proto, 11, preset)
    rng = random.Random(11)
    for _ in range(FIXED_EXECS):
        for scn in (search.next_scenario(), codec.decode(rng.randbytes(rng.randrange(0, 129)), fixed, preset)):
            run = simulate(scn, proto)
            assert run.violation is None, (run.violation.summary(), scn.to_json(None))


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
