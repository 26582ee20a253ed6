"""Runs a protocol on GPUs through the op interpreter (cuda_interp.cu) and judges it on the host.

The kernels are compiled with CuPy's NVRTC at first use, once per device; the protocol arrives as
data (cuda_prog), so no protocol needs a kernel of its own. A run of R rounds (= epochs) is cut into
launches whose logs fit a fixed budget; each launch's log is judged by the protocol's Receiver in
worker processes while the next launch runs. Every wait in the kernels has a timeout; on top, the
host gives a launch a wall-clock limit, so even a kernel bug cannot hang the caller.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import numpy as np

# With lazy module loading, loading a kernel while another one spins on the same GPU can deadlock
# (path same): load everything when the module is loaded. Set before CUDA starts in this process.
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")

from epfuzz.backends import cuda_judge
from epfuzz.backends.cuda_judge import Verdicts
from epfuzz.backends.cuda_prog import (
    FENCE,
    PARAM_FIELDS,
    STORE,
    WatchShape,
    encode_programs,
    encode_prologue,
    final_images,
    kernel_source,
    payload_tables,
    tma_refusal,
    uses_tma,
    watch_shape,
)
from epfuzz.infra.errors import BackendUnavailable, Unsupported
from epfuzz.infra.extras import install_hint
from epfuzz.infra.log import get_logger
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout, Protocol

THREADS = 256
TIMEOUT_NS = 500_000_000          # any wait in the kernels
LAUNCH_WALL_S = 60.0              # the host's own limit on one launch
LOG_BUDGET = 64 << 20             # bytes of log per launch
MAX_ENTRIES_SLACK = 8
ERRORS = {1: "the producer waited for the consumer's release", 2: "the consumer waited for the final signal",
          3: "the consumer waited for the producers' end-of-epoch barrier",
          4: "the producer met a TMA op on a GPU below sm_90 (the host should have refused it)"}
log = get_logger(component="cuda")


def cupy_available() -> tuple[bool, str]:
    try:
        import cupy
    except ImportError:
        return False, ("CuPy is not installed (the op interpreter compiles its kernels with CuPy's NVRTC): "
                       f"{install_hint('cuda')}")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - no driver, no device: say so
        return False, f"CuPy sees no CUDA device ({e})"
    return (n > 0), f"{n} GPU(s) for the op interpreter"


@lru_cache(maxsize=8)
def _functions(dev: int) -> tuple[Any, Any]:
    import cupy

    with cupy.cuda.Device(dev):
        mod = cupy.RawModule(code=kernel_source(), options=("-std=c++17",))
        return mod.get_function("ip_producer"), mod.get_function("ip_consumer")


def compute_capability(dev: int) -> int:
    """The GPU's compute capability as major * 10 + minor (90 for an H100/H200)."""
    import cupy

    return int(cupy.cuda.Device(dev).compute_capability)


def check_tma(pl: Plan, dev: int) -> None:
    """A plan with TMA Writes or ProxyFences runs only where the producer's GPU has cp.async.bulk (sm_90):
    refused with the reason, before any compile or launch (the kernel below sm_90 has no form for them)."""
    if uses_tma(pl.programs):
        why = tma_refusal(compute_capability(dev), dev)
        if why:
            raise Unsupported(f"backend cuda: {pl.proto.name}: {why}")


@lru_cache(maxsize=8)
def _peer(a: int, b: int) -> None:
    import cupy

    for d, other in ((a, b), (b, a)):
        with cupy.cuda.Device(d):
            if not cupy.cuda.runtime.deviceCanAccessPeer(d, other):
                raise BackendUnavailable(f"backend cuda: GPU {d} cannot access GPU {other} (path p2p)")
            try:
                cupy.cuda.runtime.deviceEnablePeerAccess(other)
            except cupy.cuda.runtime.CUDARuntimeError as e:
                if "AlreadyEnabled" not in str(e) and "ALREADY_ENABLED" not in str(e):
                    raise


@dataclass
class Plan:
    """Everything the kernels and the judge need for one scenario, built on the host."""

    scn: Scenario
    proto: Protocol
    lay: Layout
    shape: WatchShape
    programs: np.ndarray
    prologue: np.ndarray
    nprolog: int
    tables: tuple[np.ndarray, np.ndarray, np.ndarray]
    final: tuple[np.ndarray, np.ndarray]
    params: dict[str, int]

    @property
    def max_entries(self) -> int:
        return self.params["MAX_ENTRIES"]


def plan(scn: Scenario, proto: Protocol, incant: int | None = None) -> Plan:
    lay = proto.layout(scn)
    programs = encode_programs(proto, scn, lay)
    prologue = encode_prologue(proto, scn, lay)
    nprolog = len(proto.epoch_prologue(scn, lay, 1))
    shape = watch_shape(lay, programs)
    final = final_images(proto, lay, programs, prologue, nprolog, shape)
    rx = proto.receiver(scn, lay)
    g = scn.gpu
    watch = sum(bit for region, bit in ((ops.DATA, 1), (ops.SIGNAL, 2), (ops.CQ, 4), (ops.RECV, 8))
                if region in rx.watch)
    signals = int((programs[:, :, 0] > 0).sum())
    # one entry per change the consumer can see: every signal op, the resets, and with a watched data
    # region the body and the trailer of every slot landing, each possibly in several steps
    max_entries = signals + nprolog + MAX_ENTRIES_SLACK + (4 * shape.nslots if watch & 1 else 0)
    p = {"C": lay.num_channels, "NOPS": programs.shape[1], "SPC": lay.slots_per_channel,
         "TOKEN_BYTES": lay.token_bytes, "NSLOTS": shape.nslots, "SRC": 0, "DATA_BYTES": lay.sizes[ops.DATA],
         "SIG_BYTES": shape.sig_bytes, "CQ_BYTES": shape.cq_bytes, "COPY_CQ": int(shape.copy_cq),
         "WATCH": watch, "FENCE": FENCE[g.fence], "STORE": STORE[g.store], "SYNC": int(not g.no_sync),
         "SIG_LAST": int(g.signal_thread == "last"), "SPIN_CYCLES": g.spin_cycles,
         "POISON": int(proto.poison), "RESET": int(proto.reset_signals), "EARLY": int(proto.release_at_accept),
         "NPROLOG": nprolog, "MAX_ENTRIES": max_entries, "ENTRY_BYTES": shape.entry_bytes, "R0": 0, "R1": 0,
         "TIMEOUT_NS": TIMEOUT_NS, "INCANT": g.incantations if incant is None else incant}
    return Plan(scn, proto, lay, shape, programs, prologue, nprolog, payload_tables(lay), final, p)


def param_vector(p: dict[str, int]) -> np.ndarray:
    return np.array([p[n] for n in PARAM_FIELDS], dtype=np.int64)


# -- judging in worker processes (forked: the protocol object, plug-ins too, travels by inheritance)
_JOB: tuple[Protocol, Scenario, Layout, WatchShape] | None = None


def _set_job(job: tuple[Protocol, Scenario, Layout, WatchShape]) -> None:
    global _JOB
    _JOB = job


def _judge_piece(log_piece: np.ndarray, nent: list[int], epoch0: int) -> Verdicts:
    assert _JOB is not None
    proto, scn, lay, shape = _JOB
    return cuda_judge.judge(proto, scn, lay, shape, log_piece, nent, epoch0)


@dataclass
class InterpRun:
    verdicts: Verdicts
    rounds: int
    launches: int
    seconds: float
    gpu_seconds: float
    error: int


def run(pl: Plan, rounds: int, path: str) -> InterpRun:
    """`rounds` epochs of the protocol, producer on GPU0, consumer on GPU1 (p2p) or GPU0 (same)."""
    if path not in ("p2p", "same"):
        raise Unsupported("backend cuda: the op interpreter runs on path p2p or same; host-mapped memory is "
                          "measured by the litmus kernels only")
    import cupy

    prod, cons = (0, 1) if path == "p2p" else (0, 0)
    check_tma(pl, prod)
    if path == "p2p":
        if cupy.cuda.runtime.getDeviceCount() < 2:
            raise BackendUnavailable("backend cuda: path p2p needs two GPUs")
        _peer(prod, cons)
    fprod, _ = _functions(prod)
    _, fcons = _functions(cons)
    per_launch = max(1, min(rounds, LOG_BUDGET // (pl.max_entries * pl.shape.entry_bytes)))
    lay = pl.lay
    bufs = _buffers(cupy, pl, prod, cons, per_launch)
    on, ps, cs = bufs.on, bufs.ps, bufs.cs
    workers = max(1, min(16, (os.cpu_count() or 2) - 1))
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_set_job, initargs=((pl.proto, pl.scn, pl.lay, pl.shape),))
    futures: list[Future[Verdicts]] = []
    t0 = time.perf_counter()
    gpu_s = 0.0
    err = n_launch = done_rounds = 0
    try:
        for r0 in range(0, rounds, per_launch):
            r1 = min(rounds, r0 + per_launch) - 1
            params = param_vector({**pl.params, "R0": r0, "R1": r1})
            P_c, P_p = on(cons, params), on(prod, params)
            with cupy.cuda.Device(cons):
                bufs.c_nent.fill(-1)  # rounds a timeout cut off stay -1 and are not judged
            for d in {prod, cons}:  # copies and fills ran on the null streams; the kernels do not wait for them
                cupy.cuda.Device(d).synchronize()
            t1 = time.perf_counter()
            with cupy.cuda.Device(cons):
                fcons((1,), (THREADS,), (P_c, *bufs.cons_args), stream=cs)
            with cupy.cuda.Device(prod):
                fprod((lay.num_channels + pl.params["INCANT"],), (THREADS,), (P_p, *bufs.prod_args), stream=ps)
            _wait(cupy, (ps, cs), LAUNCH_WALL_S)
            gpu_s += time.perf_counter() - t1
            n_launch += 1
            err = int(bufs.c_err.get()[0]) or int(bufs.p_err.get()[0])
            n = r1 - r0 + 1
            nent = bufs.c_nent.get()[:n].tolist()
            logs = bufs.c_log.get().reshape(per_launch, pl.max_entries, pl.shape.entry_bytes)[:n]
            step = max(1, -(-n // workers))
            for a in range(0, n, step):
                futures.append(pool.submit(_judge_piece, logs[a:a + step].copy(), nent[a:a + step], r0 + a))
            done_rounds += n
            if err:
                break
        total = Verdicts()
        for f in futures:
            total.add(f.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    seconds = time.perf_counter() - t0
    log.info("cuda interp run", protocol=pl.proto.name, rounds=done_rounds, launches=n_launch, error=err,
             stale=total.stale, seconds=round(seconds, 3))
    return InterpRun(total, done_rounds, n_launch, seconds, gpu_s, err)


def _buffers(cupy: Any, pl: Plan, prod: int, cons: int, per_launch: int) -> SimpleNamespace:
    """The run's device memory: regions, counters and the log on the consumer's GPU, the op records
    and the release flag on the producer's; tables on both; one non-blocking stream per side."""
    crc0, deltas, tokn = pl.tables
    lay = pl.lay

    def on(dev: int, arr: np.ndarray) -> Any:
        with cupy.cuda.Device(dev):
            return cupy.asarray(arr)

    def zeros(dev: int, n: int, dtype: Any = np.uint8) -> Any:
        with cupy.cuda.Device(dev):
            return cupy.zeros(max(n, 16), dtype=dtype)

    c_data, c_sig = zeros(cons, lay.sizes[ops.DATA]), zeros(cons, lay.sizes[ops.SIGNAL])
    c_cq, c_recv = zeros(cons, lay.sizes[ops.CQ]), zeros(cons, lay.sizes[ops.RECV])
    c_done, c_err = zeros(cons, 1, np.uint32), zeros(cons, 1, np.uint32)
    c_scratch = zeros(cons, 1 << 20, np.uint32)  # the stress CTAs' target
    c_log = zeros(cons, per_launch * pl.max_entries * pl.shape.entry_bytes)
    c_nent = zeros(cons, per_launch, np.int32)
    c_tabs = [on(cons, a) for a in (crc0, deltas, tokn)]
    c_pro, c_f0, c_fs = on(cons, pl.prologue), on(cons, pl.final[0]), on(cons, pl.final[1])
    p_go, p_err = zeros(prod, 1, np.uint32), zeros(prod, 1, np.uint32)
    p_prog, p_tabs = on(prod, pl.programs), [on(prod, a) for a in (crc0, deltas, tokn)]
    with cupy.cuda.Device(prod):
        ps = cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(cons):
        cs = cupy.cuda.Stream(non_blocking=True)
    for d in {prod, cons}:
        with cupy.cuda.Device(d):
            cupy.cuda.runtime.deviceSynchronize()
    regions = (c_data, c_sig, c_cq, c_recv)
    # the kernels' parameters after P, in the order of ip_consumer's and ip_producer's signatures
    cons_args = (c_pro, *c_tabs, *regions, p_go, c_done, c_f0, c_fs, c_log, c_nent, c_err)
    prod_args = (p_prog, *p_tabs, *regions, p_go, c_done, c_scratch, p_err)
    return SimpleNamespace(on=on, ps=ps, cs=cs, cons_args=cons_args, prod_args=prod_args, c_nent=c_nent,
                           c_log=c_log, c_err=c_err, p_err=p_err)


def _wait(cupy: Any, streams: tuple[Any, ...], limit_s: float) -> None:
    start = time.perf_counter()
    while not all(s.done for s in streams):
        if time.perf_counter() - start > limit_s:
            raise RuntimeError(f"backend cuda: a launch ran past {limit_s} s despite the kernels' timeouts")
        time.sleep(0.0005)
