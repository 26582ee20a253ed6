"""The interpreter's kernels compile, without a GPU: NVRTC (PyPI's nvidia-cuda-nvrtc-cu12, in the dev extra)
builds `kernel_source()` with CuPy's options for sm_90, where the TMA ops are cp.async.bulk and
fence.proxy.async, and for sm_80, where the `__CUDA_ARCH__ >= 900` guard leaves none of them. Otherwise a
kernel that does not build would first show on the GPU machine, as lost device time. Skipped, with the
reason, where libnvrtc cannot be loaded."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from epfuzz.backends.cuda_prog import kernel_source

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import cuda_nvrtc  # noqa: E402

LIB = cuda_nvrtc.load()
pytestmark = pytest.mark.skipif(LIB is None, reason="libnvrtc not found (pip install nvidia-cuda-nvrtc-cu12)")


@pytest.fixture(scope="module")
def ptx() -> dict[str, str]:
    return {arch: cuda_nvrtc.compile_ptx(kernel_source(), arch, lib=LIB) for arch in ("compute_90", "compute_80")}


def _body(ptx: str, kernel: str) -> str:
    start = ptx.index(f".entry {kernel}(")
    end = ptx.find(".entry ", start + 1)
    return ptx[start:end if end > 0 else len(ptx)]


def test_on_sm_90_a_tma_write_is_a_bulk_copy_and_the_proxy_fence_waits_then_fences(ptx):
    prod = _body(ptx["compute_90"], "ip_producer")
    for op in cuda_nvrtc.TMA_PTX:
        assert op in prod, op
    # ProxyFence: the full wait (writes complete, not .read) comes right before the proxy fence
    assert re.search(r"cp\.async\.bulk\.wait_group 0;\s*(//.*\s*)*fence\.proxy\.async;", prod)
    assert "cp.async.bulk" not in _body(ptx["compute_90"], "ip_consumer")  # the consumer polls with ld only


def test_below_sm_90_the_guard_leaves_no_bulk_copy_and_the_producer_stops_instead(ptx):
    old = ptx["compute_80"]
    assert "cp.async.bulk" not in old and "fence.proxy" not in old
    # error 4 (cuda_interp.ERRORS): an atomic exchange of 4 into perr, not a plain store in the TMA's place
    assert re.search(r"atom(\.global)?\.exch\.b32\s+%r\d+, \[%rd\d+\], 4;", _body(old, "ip_producer"))


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_it_assembles(arch):
    """ptxas (inside NVRTC) accepts the inline PTX's operands: the bulk copy's shared::cta address, its size."""
    assert cuda_nvrtc.compile_ptx(kernel_source(), arch, lib=LIB).startswith("<cubin of ")
