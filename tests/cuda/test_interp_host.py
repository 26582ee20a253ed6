"""The interpreter's host side (cuda_interp.run) without a GPU: CuPy is faked and the consumer kernel
is the sequentially consistent reference (cuda_ref), so buffers, launches, logs and judging are exercised
end to end in CI; the real kernels are tested on a GPU (test_interp_gpu.py)."""

from __future__ import annotations

import sys
import types
from contextlib import nullcontext

import numpy as np
import pytest

from epfuzz.backends import cuda_interp
from epfuzz.backends.cuda_prog import PARAM_FIELDS
from epfuzz.backends.cuda_ref import RefMachine
from epfuzz.encoding import codec
from epfuzz.infra.errors import Unsupported
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol


class FakeArray:
    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def get(self) -> np.ndarray:
        return self.a.copy()

    def fill(self, v: int) -> None:
        self.a.fill(v)


def fake_cupy(consumer, cc: str = "90") -> types.ModuleType:
    """`cc`: every GPU's compute capability as CuPy's Device gives it ("90" for an H200)."""
    cp = types.ModuleType("cupy")
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 2, deviceSynchronize=lambda: None,
                                    deviceCanAccessPeer=lambda a, b: 1, deviceEnablePeerAccess=lambda o: None,
                                    CUDARuntimeError=RuntimeError)
    class Device(nullcontext):  # CuPy's Device: a context manager that can also synchronize
        def __init__(self, d):
            super().__init__()

        compute_capability = cc

        def synchronize(self):
            pass

    cp.cuda = types.SimpleNamespace(Device=Device, runtime=runtime,
                                    Stream=lambda non_blocking: types.SimpleNamespace(done=True))
    cp.asarray = lambda a: FakeArray(np.array(a))
    cp.zeros = lambda n, dtype: FakeArray(np.zeros(n, dtype=dtype))

    class Module:
        def __init__(self, code, options):
            cp.compiled = True  # type: ignore[attr-defined]

        def get_function(self, name):
            return consumer if name == "ip_consumer" else (lambda *a, **k: None)

    cp.RawModule = Module
    return cp


def ref_consumer(pl, proto, scn):
    """The consumer kernel, played by the sequentially consistent reference."""
    crc0, deltas, _ = pl.tables
    ref = RefMachine(pl.lay, pl.shape, pl.programs, pl.prologue, pl.nprolog, crc0, tuple(int(d) for d in deltas),
                     poison=proto.poison, reset=proto.reset_signals,
                     data_watched=ops.DATA in proto.receiver(scn, pl.lay).watch)

    def consumer(grid, block, args, stream):
        P = dict(zip(PARAM_FIELDS, args[0].a.tolist()))
        log, nent = args[-3].a, args[-2].a
        eb, maxe = P["ENTRY_BYTES"], P["MAX_ENTRIES"]
        for r in range(P["R0"], P["R1"] + 1):
            entries = ref.run_epoch(r)
            for k, ent in enumerate(entries):
                at = ((r - P["R0"]) * maxe + k) * eb
                log[at:at + ent.size] = ent
            nent[r - P["R0"]] = len(entries)
    return consumer


@pytest.mark.parametrize("cc, refused", [("90", False), ("100", False), ("80", True)])
def test_tma_ops_run_from_sm_90_and_are_refused_below_before_any_compile(monkeypatch, cc, refused):
    name = "tma_flag_fixed"
    proto = get_protocol(name)
    scn = codec.load_dict({"protocol": name, "payload": {"num_tokens": 6, "hidden_bytes": 96},
                           "topology": {"num_channels": 2}})
    pl = cuda_interp.plan(scn, proto)
    cp = fake_cupy(ref_consumer(pl, proto, scn), cc)
    cuda_interp._functions.cache_clear()
    cuda_interp._peer.cache_clear()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    try:
        if refused:
            with pytest.raises(Unsupported, match=f"tma_flag_fixed: TMA bulk stores .* need sm_90 or newer; GPU 0 is "
                                                  f"sm_{cc}"):
                cuda_interp.run(pl, 5, "p2p")
            assert not hasattr(cp, "compiled")
        else:
            res = cuda_interp.run(pl, 5, "p2p")
            assert (res.rounds, res.error, res.verdicts.stale, res.verdicts.hangs) == (5, 0, 0, 0)
    finally:
        cuda_interp._functions.cache_clear()
        cuda_interp._peer.cache_clear()


@pytest.mark.parametrize("name, stale", [("deepep_v2_dispatch_fixed", False), ("stale_epoch_counter", True)])
def test_run_judges_every_round_of_every_launch(monkeypatch, name, stale):
    proto = get_protocol(name)
    scn = codec.load_dict({"protocol": name, "payload": {"num_tokens": 6, "hidden_bytes": 96},
                              "topology": {"num_channels": 2}, "signal": {"interval": 2}})
    pl = cuda_interp.plan(scn, proto)
    cuda_interp._functions.cache_clear()
    cuda_interp._peer.cache_clear()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(ref_consumer(pl, proto, scn)))
    monkeypatch.setattr(cuda_interp, "LOG_BUDGET", 7 * pl.max_entries * pl.shape.entry_bytes)  # 7 rounds a launch
    res = cuda_interp.run(pl, 20, "p2p")
    cuda_interp._functions.cache_clear()
    cuda_interp._peer.cache_clear()
    assert (res.rounds, res.launches, res.error) == (20, 3, 0)
    assert res.verdicts.rounds == 20 and res.verdicts.hangs == 0
    assert res.verdicts.stale == (19 if stale else 0)  # every epoch but the first reads last call's counter
