"""The cuda backend's litmus kernels: one message-passing shape, measured fast (the weak-outcome table).

Kept beside the op interpreter (cuda_interp) because they run millions of rounds a minute and measure
the host-mapped path, which the interpreter does not.

The scenario maps onto a producer/consumer pair (kernels in cuda_mp.cu, host side
in cuda_mp.cpp, compiled once with torch.utils.cpp_extension.load_inline and
cached): channels are producer CTAs, tokens x token bytes are the words each
round writes into reused slots, the signal comes every `signal.interval` tokens
(`at_end_only`: once), `signal.kind` faa is atomicAdd_system and the other kinds
a flag store made as `gpu.store` says, after `gpu.fence` and `gpu.spin_cycles`;
`gpu.incantations` adds traffic CTAs. A run is `repeats` rounds (at least
MIN_ROUNDS), cut into launch pairs of `gpu.launch_rounds` rounds; before each
launch, torch's sleep kernel (at::cuda::sleep, what torch.cuda._sleep runs) holds
the producer's stream, or the consumer's, for `gpu.launch_skew` cycles; `gpu.fresh_buffers` maps new buffers for
the run (a TLB-cold start). The verdict is found-in-k-of-R, litmus style. Without torch, CUDA,
or (for p2p) two GPUs with peer access, the backend says why and does not run.
"""

from __future__ import annotations

import os
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from epfuzz.backends.base import Outcome
from epfuzz.infra.errors import BackendUnavailable, Unsupported
from epfuzz.ir.scenario import Scenario
from epfuzz.model.oracle import Violation
from epfuzz.protocols import get_protocol

HERE = Path(__file__).resolve().parent
MIN_ROUNDS = 2000
THREADS = 256
BIG_CHUNK_WORDS = 8192
TIMEOUT_S = 2.0
SIG_KIND = {"plain": 0, "volatile": 1, "release_sys": 3}
FENCE = {"none": 0, "threadfence": 1, "threadfence_system": 2}


@lru_cache(maxsize=1)
def _extension() -> Any:
    from torch.utils.cpp_extension import load_inline

    cache = Path(os.environ.get("EPFUZZ_CUDA_CACHE", Path.home() / ".cache" / "epfuzz" / "cuda"))
    cache.mkdir(parents=True, exist_ok=True)
    return load_inline(
        name="epfuzz_cuda_mp",
        cpp_sources=[(HERE / "cuda_mp.cpp").read_text()],
        cuda_sources=[(HERE / "cuda_mp.cu").read_text()],
        extra_cflags=["-O3"],  # the JIT build has no optimisation by default: the CPU consumer needs it
        extra_cuda_cflags=["-O3", "-std=c++17"],
        build_directory=str(cache),
        verbose=False,
    )


def params(scn: Scenario, rounds: int) -> dict[str, int]:
    """The kernel parameters a scenario means, in MpParams order; pure, so it is tested without a GPU."""
    proto = get_protocol(scn.protocol)
    lay = proto.layout(scn)
    g = scn.gpu
    n = lay.slots_per_channel
    k = n if scn.signal.at_end_only else max(1, min(scn.signal.interval, n))
    sig = 2 if scn.signal.kind == "faa" else SIG_KIND[g.store]
    clock_hz = 1_980_000_000
    C = lay.num_channels
    return {
        "C": C, "n": n, "W": lay.token_bytes // 4, "k": k, "nchunks": -(-n // k),
        "sig_kind": sig, "fence": FENCE[g.fence], "sig_last": int(g.signal_thread == "last"),
        "sync": int(not g.no_sync), "spin": g.spin_cycles, "r0": 1, "r1": rounds, "incant": g.incantations,
        "done_target": C, "timeout": int(TIMEOUT_S * clock_hz),
    }


def threads(p: dict[str, int]) -> int:
    """Threads per CTA: 256, or 1024 when a chunk is big enough to keep them busy (64K-word messages
    move four times faster that way); the signalling thread is still the CTA's first or last."""
    return 1024 if p["k"] * p["W"] >= BIG_CHUNK_WORDS else THREADS


def launches(scn: Scenario, rounds: int) -> list[tuple[int, int]]:
    """The rounds [r0, r1] of each kernel launch pair (mirrors `Launches` in cuda_mp.cpp)."""
    per = scn.gpu.launch_rounds or rounds
    return [(r0, min(rounds, r0 + per - 1)) for r0 in range(1, rounds + 1, per)]


def litmus_name(scn: Scenario) -> str:
    sig = "faa" if scn.signal.kind == "faa" else scn.gpu.store
    fence = {"none": "nofence", "threadfence": "fence", "threadfence_system": "fencesys"}[scn.gpu.fence]
    return f"{scn.gpu.path}-mp-{sig}-{fence}"


def run_litmus(scn: Scenario, prepared: set[tuple[int, int]], repeats: int = 1) -> Outcome:
    """The message-passing litmus kernels (the weak-outcome table): the scenario's sizes and `gpu` fields,
    not its protocol's sender; `prepared` remembers the device pairs already set up."""
    import torch

    rounds = max(repeats, MIN_ROUNDS)
    p = params(scn, rounds)
    path = scn.gpu.path
    if path == "p2p":
        if torch.cuda.device_count() < 2 or not torch.cuda.can_device_access_peer(0, 1):
            raise BackendUnavailable("backend cuda: path p2p needs two GPUs with peer access")
        prod, cons = 0, 1
    else:
        prod = cons = 0
    ext = _extension()
    if (prod, cons) not in prepared:
        ext.prepare(prod, cons)
        prepared.add((prod, cons))
    if path == "host" and p["sig_kind"] == 2 and not ext.host_atomics(prod):
        raise Unsupported("backend cuda: atomicAdd_system on host-mapped memory needs native host atomics, "
                         "which this GPU/host does not report")
    words = p["C"] * p["n"] * p["W"]
    i32 = torch.int32
    g = scn.gpu
    if g.fresh_buffers:
        # Without traffic CTAs the rare weak rounds on the H200 pair came in a run's first rounds;
        # cold mappings were the suspect. Hand torch's cached blocks back, so this run's buffers
        # are new mappings whose first peer writes miss in the TLBs, as a freshly registered
        # window's do. (Measured there: no effect, bench/cuda/cold.jsonl; kept for other machines.)
        torch.cuda.empty_cache()
        getattr(torch._C, "_host_emptyCache", lambda: None)()
    launch = (g.launch_rounds, g.launch_skew, g.skew_consumer)
    t0 = time.perf_counter()
    if path == "host":
        dst = torch.zeros(words, dtype=i32, pin_memory=True)
        flags = torch.zeros(p["C"] * 32, dtype=i32, pin_memory=True)
        ack = torch.zeros(p["C"], dtype=i32, pin_memory=True)
        scratch = torch.zeros(1 << 20, dtype=i32, device=f"cuda:{prod}")
        done = torch.zeros(1, dtype=i32, device=f"cuda:{prod}")
        perr = torch.zeros(1, dtype=i32, device=f"cuda:{prod}")
        torch.cuda.synchronize(prod)
        stale_rounds, stale_words, timed_out = ext.run_host(dst, flags, ack, scratch, done, perr, prod,
                                                            list(p.values()), threads(p), TIMEOUT_S * 4,
                                                            *launch)
        err = int(perr.item()) or (3 if timed_out else 0)
        first_weak = []  # the CPU consumer counts, it does not keep round numbers
    else:
        cdev, pdev = f"cuda:{cons}", f"cuda:{prod}"
        dst = torch.zeros(words, dtype=i32, device=cdev)
        flags = torch.zeros(p["C"] * 32, dtype=i32, device=cdev)
        stale = torch.zeros(rounds, dtype=i32, device=cdev)
        sw = torch.zeros(1, dtype=torch.int64, device=cdev)
        cerr = torch.zeros(1, dtype=i32, device=cdev)
        ack = torch.zeros(p["C"], dtype=i32, device=pdev)
        scratch = torch.zeros(1 << 20, dtype=i32, device=cdev)  # incantations load the consumer's memory
        done = torch.zeros(1, dtype=i32, device=pdev)
        perr = torch.zeros(1, dtype=i32, device=pdev)
        # the zero fills above run on each device's current stream and the kernels on other streams:
        # wait for the fills, or a late fill would look like stale data
        for d in {prod, cons}:
            torch.cuda.synchronize(d)
        ext.run_gpu(dst, flags, ack, scratch, done, perr, cerr, stale, sw, prod, cons, list(p.values()),
                    threads(p), *launch)
        weak_at = torch.nonzero(stale).flatten()
        stale_rounds = int(weak_at.numel())
        first_weak = [int(i) + 1 for i in weak_at[:16].tolist()]
        stale_words = int(sw.item())
        err = int(perr.item()) or int(cerr.item())
    seconds = time.perf_counter() - t0
    return _litmus_outcome(scn, rounds, seconds, stale_rounds, stale_words, first_weak, err)


def _litmus_outcome(scn: Scenario, rounds: int, seconds: float, stale_rounds: int, stale_words: int,
                    first_weak: list[int], err: int) -> Outcome:
    """The litmus-style verdict (found in k of R rounds), or a hang when a wait timed out."""
    name = litmus_name(scn)
    if err:  # a wait timed out: the signal (or the ack) never became visible
        who = {1: "producer waited for the ack", 2: "consumer waited for the signal"}.get(err, "host timed out")
        hang = Violation("hang", scn.protocol, -1, -1, f"{who} > {TIMEOUT_S} s ({name})")
        return Outcome("cuda", hang, runs=1, hits=1, summary=f"hang: {who}", extra={"litmus": name})
    verdict = "Sometimes" if stale_rounds else "Never"
    n_launch = len(launches(scn, rounds))
    at = f" (weak at rounds {', '.join(map(str, first_weak))})" if first_weak else ""
    summary = (f"Observation {name} {verdict} {stale_rounds} {rounds - stale_rounds}\n"
               f"{rounds} rounds in {n_launch} launch(es), {seconds:.3f} s "
               f"({rounds / seconds * 60:,.0f} rounds/min), {stale_words} stale words{at}")
    v: Violation | None = None
    if stale_rounds:
        v = Violation("stale-accept", scn.protocol, -1, -1,
                      f"{stale_rounds} of {rounds} rounds ({name})", bad_bytes=4 * stale_words,
                      extra={"rounds": rounds, "stale_rounds": stale_rounds, "stale_words": stale_words})
    return Outcome("cuda", v, runs=rounds, hits=stale_rounds, summary=summary,
                   extra={"litmus": name, "seconds": seconds, "stale_words": stale_words,
                          "first_weak_rounds": first_weak})
