"""cuda backend: the scenario -> kernel mapping (anywhere) and the real GPU runs (skipped without a GPU)."""

from __future__ import annotations

import pytest

from epfuzz.backends import get_backend
from epfuzz.backends.cuda import CudaBackend, launches, litmus_name, params, threads
from epfuzz.encoding import codec
from epfuzz.infra.errors import BackendUnavailable

OK, WHY = CudaBackend().litmus_availability()
needs_gpu = pytest.mark.skipif(not OK, reason=f"cuda litmus kernels unavailable here: {WHY}")




def mp(tokens=16, **gpu):
    return codec.load_dict({"protocol": "dispatch_any", "signal": {"kind": "write", "at_end_only": True},
                            "payload": {"num_tokens": tokens, "hidden_bytes": 16384, "meta_bytes": 16},
                            "gpu": gpu})


def test_params_follow_the_scenario():
    p = params(mp(4, fence="threadfence_system", store="release_sys", signal_thread="last", spin_cycles=100), 500)
    assert (p["C"], p["n"], p["W"], p["k"], p["nchunks"]) == (1, 4, (16384 + 16) // 4, 4, 1)
    assert (p["sig_kind"], p["fence"], p["sig_last"], p["spin"], p["r0"], p["r1"]) == (3, 2, 1, 100, 1, 500)
    assert list(p)[-1] == "timeout" and len(p) == 15  # MpParams order, read by index in cuda_mp.cpp
    assert threads(p) == 1024  # a 16K-byte chunk keeps 1024 threads busy
    faa = codec.load_dict({"protocol": "deepep_v2_dispatch", "signal": {"interval": 2},
                              "topology": {"num_channels": 3}, "payload": {"num_tokens": 9}})
    q = params(faa, 10)
    assert q["sig_kind"] == 2 and q["C"] == 3 and q["n"] == 3 and q["k"] == 2 and q["nchunks"] == 2
    assert threads(q) == 256


def test_rounds_are_cut_into_launches():
    assert launches(mp(), 2500) == [(1, 2500)]
    assert launches(mp(launch_rounds=1000), 2500) == [(1, 1000), (1001, 2000), (2001, 2500)]
    assert launches(mp(launch_rounds=1), 3) == [(1, 1), (2, 2), (3, 3)]


def test_litmus_names():
    assert litmus_name(mp()) == "p2p-mp-plain-nofence"
    assert litmus_name(mp(path="host", fence="threadfence_system")) == "host-mp-plain-fencesys"


@pytest.mark.skipif(CudaBackend().availability()[0], reason="this host has a usable GPU")
def test_unavailable_backend_says_why():
    with pytest.raises(BackendUnavailable, match="cuda cannot run here"):
        get_backend("cuda")


@needs_gpu
@pytest.mark.cuda
def test_same_gpu_fenced_rounds_are_clean():
    out = get_backend("cuda", require=False).run_litmus(mp(path="same", fence="threadfence_system"), repeats=2000)
    assert out.runs == 2000 and out.hits == 0


@needs_gpu
@pytest.mark.cuda
def test_nvlink_fenced_rounds_are_clean():
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    out = get_backend("cuda", require=False).run_litmus(mp(path="p2p", fence="threadfence_system"), repeats=20000)
    assert out.hits == 0, out.summary


@needs_gpu
@pytest.mark.cuda
def test_harness_found_cases_replay_and_their_system_fenced_form_is_clean():
    """Weak outcomes are rare and bursty on real hardware (docs/backends.md: a few per 2,000 rounds at best),
    so the unfenced cases are only replayed; their __threadfence_system forms must never be weak."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from pathlib import Path

    from epfuzz.cases.corpus import load_case

    for path in sorted((Path(__file__).resolve().parents[2] / "corpus" / "cuda").glob("*.json")):
        scn = load_case(path).scenario
        get_backend("cuda", require=False).run_litmus(scn, repeats=2000)  # runs to completion (no hang, no error)
        fenced = scn.with_path("gpu.fence", "threadfence_system")
        assert get_backend("cuda", require=False).run_litmus(fenced, repeats=50_000).hits == 0, path.name


@needs_gpu
@pytest.mark.cuda
@pytest.mark.parametrize("path", ["same", "host"])
def test_unaligned_chunked_channels_are_checked_word_for_word(path):
    """Three channels, chunks of three 1,296-byte tokens: every word of every chunk must be written
    and checked through the head/vector/tail split; a word the split missed reads as stale in
    every round."""
    scn = codec.load_dict({"protocol": "deepep_v2_dispatch", "signal": {"interval": 3},
                           "topology": {"num_channels": 3}, "payload": {"num_tokens": 21, "hidden_bytes": 1137,
                                                                        "meta_bytes": 129},
                           "gpu": {"path": path, "fence": "threadfence_system", "store": "release_sys"}})
    if path == "host":
        scn = scn.with_path("signal.kind", "write")
    p = params(scn, 2000)
    assert p["nchunks"] > 1 and p["C"] == 3
    out = get_backend("cuda", require=False).run_litmus(scn, repeats=2000)
    assert out.runs == 2000 and out.hits == 0, out.summary


@needs_gpu
@pytest.mark.cuda
@pytest.mark.parametrize("path", ["p2p", "same", "host"])
@pytest.mark.parametrize("skew_consumer", [False, True])
def test_launch_skew_sleeps_one_side_before_every_launch(path, skew_consumer):
    """20 launches, each behind 2^20 cycles of sleep on one side (>= 0.5 ms at the H200's top clock):
    the run cannot be shorter than 10 ms, and the split run is still a correct protocol."""
    import torch

    if path == "p2p" and torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    scn = mp(path=path, fence="threadfence_system", launch_rounds=100, launch_skew=1 << 20,
             skew_consumer=skew_consumer)
    out = get_backend("cuda", require=False).run_litmus(scn, repeats=2000)
    assert out.violation is None and out.runs == 2000, out.summary
    assert "20 launch(es)" in out.summary
    assert out.extra["seconds"] >= 0.01, out.summary


@needs_gpu
@pytest.mark.cuda
def test_fresh_buffers_map_new_memory_for_every_run():
    """Reused: the second run takes torch's cached blocks (no new segment); fresh: it maps new ones."""
    import torch

    def segments():
        return sum(torch.cuda.memory_stats(d).get("segment.all.allocated", 0)
                   for d in range(torch.cuda.device_count()))

    b = get_backend("cuda", require=False)
    for fresh, grows in ((False, False), (True, True)):
        scn = mp(path="same", fence="threadfence_system", fresh_buffers=fresh)
        b.run_litmus(scn, repeats=2000)
        before = segments()
        out = b.run_litmus(scn, repeats=2000)
        assert out.hits == 0, out.summary
        assert (segments() > before) == grows, fresh


def test_kernels_compile_where_nvcc_is():
    """The device code builds before any GPU time is spent on it (nvcc is on GPU machines; here
    `pip install nvidia-cuda-nvcc nvidia-cuda-runtime` provides one)."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    src = Path(__file__).resolve().parents[2] / "epfuzz" / "backends" / "cuda_mp.cu"
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([nvcc, "-c", "-O3", "-std=c++17", "-arch=sm_90", str(src), "-o", f"{tmp}/mp.o"],
                           capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
