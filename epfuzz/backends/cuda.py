"""`cuda`: the protocol itself on real GPUs, through an interpreter of `epfuzz.ir.ops`.

`run` hands the protocol's sender programs to the op interpreter (cuda_interp.cu; encoding in
cuda_prog, host side in cuda_interp): GPU0's CTAs run one channel each against GPU1's memory over
NVLink (`gpu.path` p2p) or the same GPU's, with `gpu.fence`, `gpu.store`, `gpu.spin_cycles`,
`gpu.no_sync`, `gpu.signal_thread` and `gpu.incantations` (stress CTAs) as the scenario says; the
consumer kernel logs what it sees when a watched word changes and the protocol's own Receiver judges
that log on the host (cuda_judge). A run is `repeats` rounds (at least MIN_ROUNDS), one epoch each;
the verdict is found-in-k-of-R. `run_litmus` keeps the fast message-passing kernels (cuda_mp) that
measured the weak-outcome table, host-mapped memory included. Without CuPy/torch, a GPU, or (for
p2p) two GPUs with peer access, the backend says why and does not run.
"""

from __future__ import annotations

import importlib.util

from epfuzz.backends import cuda_interp
from epfuzz.backends.base import Backend, Outcome
from epfuzz.backends.cuda_mp import launches, litmus_name, params, run_litmus, threads
from epfuzz.infra.errors import BackendUnavailable
from epfuzz.infra.extras import install_hint
from epfuzz.ir.scenario import Scenario
from epfuzz.model.oracle import Violation
from epfuzz.protocols.base import Protocol

MIN_ROUNDS = 1000

__all__ = ["CudaBackend", "launches", "litmus_name", "params", "threads", "MIN_ROUNDS"]


def _violation(d: dict[str, object]) -> Violation:
    """A Violation from the judge's dict (what crosses the worker-process boundary)."""
    fields = {k: d[k] for k in ("kind", "protocol", "epoch", "channel", "what", "region", "offset", "length",
                                "bad_bytes", "tokens", "trigger", "position") if k in d}
    v = Violation(**fields)  # type: ignore[arg-type]
    chunks = d.get("bad_chunks")
    v.bad_chunks = [(int(o), str(c)) for o, c in chunks] if isinstance(chunks, list) else []
    return v


#: on the GPU the RDMA knobs mean nothing; the GPU form's fields tell bugs apart
GPU_SIGNATURE_FIELDS = ("signal.kind", "gpu.path", "gpu.fence", "gpu.store", "gpu.signal_thread", "gpu.no_sync")


class CudaBackend(Backend):
    name = "cuda"
    deterministic = False

    def signature_fields(self, proto: Protocol) -> tuple[str, ...]:
        return GPU_SIGNATURE_FIELDS

    def __init__(self) -> None:
        self._prepared: set[tuple[int, int]] = set()

    def availability(self) -> tuple[bool, str]:
        ok, why = cuda_interp.cupy_available()
        if not ok:
            return False, why
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        peer = n >= 2 and bool(cupy.cuda.runtime.deviceCanAccessPeer(0, 1))
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else name
        return True, f"{n} GPU(s) ({name}); NVLink/PCIe peer access 0->1: {peer}"

    def run(self, scn: Scenario, proto: Protocol, repeats: int = 1) -> Outcome:
        ok, why = self.availability()
        if not ok:
            raise BackendUnavailable(f"backend cuda cannot run here: {why}")
        rounds = max(repeats, MIN_ROUNDS)
        res = cuda_interp.run(cuda_interp.plan(scn, proto), rounds, scn.gpu.path)
        v = res.verdicts
        per100k = (v.stale + v.hangs) / max(1, v.rounds) * 100_000
        name = f"{proto.name}@{scn.gpu.path}"
        summary = (f"{name}: {v.stale} of {v.rounds} rounds accepted data not yet landed, {v.hangs} hung "
                   f"({per100k:,.1f} per 100k); {res.launches} launch(es), {res.seconds:.2f} s, "
                   f"{v.entries / max(1, v.rounds):.1f} log entries a round")
        extra = {"rounds": v.rounds, "stale_rounds": v.stale, "hang_rounds": v.hangs, "overflow": v.overflow,
                 "seconds": res.seconds, "gpu_seconds": res.gpu_seconds, "examples": v.examples}
        if res.error:
            who = cuda_interp.ERRORS.get(res.error, "a wait timed out")
            hang = Violation("hang", proto.name, v.rounds, -1,
                             f"{who} > {cuda_interp.TIMEOUT_NS / 1e9} s ({name})")
            return Outcome("cuda", hang, runs=max(1, v.rounds), hits=max(1, v.hangs + v.stale),
                           summary=f"hang: {who}\n{summary}", extra=extra)
        violation = _violation(v.examples[0]) if v.examples else None
        if violation is not None:
            violation.extra = {"rounds": v.rounds, "stale_rounds": v.stale, "hang_rounds": v.hangs}
        return Outcome("cuda", violation, runs=v.rounds, hits=v.stale + v.hangs, summary=summary, extra=extra)

    def litmus_availability(self) -> tuple[bool, str]:
        if importlib.util.find_spec("torch") is None:
            return False, f"torch is not installed ({install_hint('cuda')})"
        import torch

        if not torch.cuda.is_available():
            return False, "torch sees no CUDA device"
        return True, f"{torch.cuda.device_count()} GPU(s) for the litmus kernels"

    def run_litmus(self, scn: Scenario, repeats: int = 1) -> Outcome:
        """The message-passing litmus kernels (the weak-outcome table); the scenario's protocol is not run."""
        ok, why = self.litmus_availability()
        if not ok:
            raise BackendUnavailable(f"backend cuda cannot run here: {why}")
        return run_litmus(scn, self._prepared, repeats)
