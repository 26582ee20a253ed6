"""TMA bulk stores on a GPU: `tma_flag` and `tma_flag_fixed` through the interpreter's sm_90 path
(cp.async.bulk from shared memory; ProxyFence = cp.async.bulk.wait_group 0 + fence.proxy.async).

The cells are the agreement table's cuda cells (bench/cuda_agreement.py's scenario: 9 DeepEP-sized tokens on
3 channels, its spins, 0 or 7 stress CTAs) plus one of small tokens without spins, on one GPU (path same: producer and
consumer CTAs on GPU0), and on two over NVLink where there are two. A stale accept of `tma_flag` is possible,
not required: its flag is ordered after the data only by a generic-proxy release, which the PTX memory model
does not extend to the async proxy, but the bulk stores may always land first on this hardware. The fixed
form must show none; neither may hang or end in a kernel error (a bulk copy that wrote wrong bytes would be
a hang: the consumer waits for every slot's payload). Rows (counts as the agreement table's) are appended
to $EPFUZZ_TMA_OUT when it is set (bench/cuda_device.sh tma). Skipped, with the reason, without a GPU;
below sm_90 only the refusal is tested."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from epfuzz.backends import cuda_interp
from epfuzz.backends.cuda import CudaBackend
from epfuzz.infra.errors import Unsupported
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from cuda_agreement import gpu_scenario  # noqa: E402

OK, WHY = CudaBackend().availability()
ROUNDS = int(os.environ.get("EPFUZZ_TMA_ROUNDS", "100000"))
OUT = os.environ.get("EPFUZZ_TMA_OUT", "")
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not OK, reason=f"cuda op interpreter unavailable here: {WHY}")]
#: "deepep": the agreement table's scenario as it is; "small-nospin": 1 KB tokens and no spins, so the signal
#: follows the last bulk copy at once (the spins give the data time to land before channels 0 and 1 signal)
SHAPES = {"deepep": None, "small-nospin": {"num_tokens": 9, "hidden_bytes": 1024, "meta_bytes": 16}}


def capability() -> int:
    return cuda_interp.compute_capability(0)


def sm90() -> None:
    cc = capability()
    if cc < 90:
        pytest.skip(f"GPU 0 is sm_{cc}: TMA bulk stores need sm_90 (the refusal is tested instead)")


def scenario(name: str, shape: str, stress: int, path: str) -> Scenario:
    scn = gpu_scenario(name, "sys", stress)  # the protocol pins gpu.fence (threadfence_system) and p2p
    payload = SHAPES[shape]
    if payload:
        scn = scn.replace(payload=replace(scn.payload, **payload), faults=replace(scn.faults, spins=()))
    return scn.replace(gpu=replace(scn.gpu, path=path))


def record(row: dict[str, Any]) -> None:
    print(json.dumps({k: v for k, v in row.items() if k != "example"}))
    if OUT:
        with open(OUT, "a") as f:
            f.write(json.dumps(row) + "\n")


def cell(name: str, shape: str, stress: int, path: str):
    o = CudaBackend().run(scenario(name, shape, stress, path), get_protocol(name), repeats=ROUNDS)
    record({"protocol": name, "form": "sys", "shape": shape, "stress": stress, "path": path, "rounds": ROUNDS,
            "runs": o.runs, "hits": o.hits, "summary": o.summary, "capability": capability(),
            **{k: o.extra.get(k) for k in ("stale_rounds", "hang_rounds", "overflow", "seconds", "gpu_seconds")},
            "example": (o.extra.get("examples") or [None])[0]})
    # no kernel error (a timed-out wait is reported as a hang), no hung round, no overflowing log
    assert not o.summary.startswith("hang"), o.summary
    assert o.runs == ROUNDS and o.extra["hang_rounds"] == 0 and o.extra["overflow"] == 0, o.summary
    assert o.violation is None or o.violation.kind == "stale-accept", o.summary
    return o


@pytest.mark.parametrize("stress", [0, 7])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", ["tma_flag", "tma_flag_fixed"])
def test_tma_cells_on_one_gpu(name, shape, stress):
    sm90()
    o = cell(name, shape, stress, "same")
    if name.endswith("_fixed"):
        assert o.hits == 0 and o.violation is None, o.summary


@pytest.mark.parametrize("name", ["tma_flag", "tma_flag_fixed"])
def test_tma_cells_over_nvlink(name):
    sm90()
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("path p2p needs two GPUs")
    o = cell(name, "deepep", 7, "p2p")
    if name.endswith("_fixed"):
        assert o.hits == 0 and o.violation is None, o.summary


def test_below_sm_90_tma_is_refused_with_the_reason():
    cc = capability()
    if cc >= 90:
        pytest.skip(f"GPU 0 is sm_{cc}: it runs TMA bulk stores")
    with pytest.raises(Unsupported, match=f"need sm_90 or newer; GPU 0 is sm_{cc}"):
        name = "tma_flag_fixed"
        CudaBackend().run(scenario(name, "small-nospin", 0, "same"), get_protocol(name), repeats=1)
