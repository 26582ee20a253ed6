#!/usr/bin/env python3
"""Where a verbs run's time goes, inside the soft-RoCE guest (issue 19's throughput).

    epfuzz vm run -- python3 bench/verbs_guest.py [N [CORPUS]]
    epfuzz vm run -- python3 bench/verbs_guest.py --campaign [N [CORPUS]]

Plain: runs N inputs of dispatch_any (the seed corpus, or CORPUS, as a campaign decodes
them) through the verbs backend once each, prints executions per second, the slowest
inputs and what they ask for, the top of a cProfile of those runs, and the kernel's count
of QPs and MRs before and after (do runs release their verbs resources?).

--campaign: what one job of `epfuzz fuzz dispatch_any --backend verbs` does, without
libFuzzer's own loop: epfuzz imported under atheris instrumentation as the harness script
imports it, the harness's seed runs, then N inputs made by the campaign's custom mutator
from the growing pool, each through `Harness.test_one_input`. Prints the start-up split
(imports, instrumentation, seeds), exec/s of the mutation phase, the time in tc, and the
top of a cProfile of that phase.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = "dispatch_any"


def resources() -> dict[str, int]:
    out = {}
    for kind in ("qp", "mr", "cq", "pd"):
        p = subprocess.run(["rdma", "resource", "show", kind], capture_output=True, text=True)
        out[kind] = len([x for x in p.stdout.splitlines() if x.strip()])
    return out


def top(prof: cProfile.Profile, n: int = 25) -> str:
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(n)
    return s.getvalue()


def plain(n: int, corpus: Path) -> None:
    from epfuzz.backends import get_backend
    from epfuzz.encoding import codec
    from epfuzz.infra.errors import Unsupported
    from epfuzz.protocols import get_protocol

    proto = get_protocol(PROTOCOL)
    seeds = sorted(p for p in corpus.iterdir() if p.is_file())
    inputs = [codec.decode(p.read_bytes(), PROTOCOL, "spec") for p in seeds]
    b = get_backend("verbs")
    b.run(inputs[0], proto)  # devices and the rxe pair come up outside the measurement
    before = resources()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    done = 0
    slow = []
    stuck: list[tuple[float, str, object]] = []
    prof.enable()
    for scn in (inputs * (n // len(inputs) + 1))[:n]:
        t = time.perf_counter()
        try:
            out = b.run(scn, proto)
        except Unsupported as err:
            stuck.append((time.perf_counter() - t, str(err), scn))
            continue
        slow.append((time.perf_counter() - t, out.verdict, scn))
        done += 1
    prof.disable()
    for t, verdict, scn in sorted(slow, key=lambda x: -x[0])[:8]:
        f = scn.faults
        print(f"{t:6.2f} s {verdict:8s} epochs {scn.payload.epochs} tokens {scn.payload.num_tokens} "
              f"qps {scn.topology.num_qps} delay {list(f.qp_delay_ns)} div {list(f.qp_rate_div)} "
              f"port {f.port_rate_div} spins {len(f.spins)} signal {scn.signal.kind}")
    for t, why, scn in stuck:  # inconclusive runs: what they asked for (a stall costs STALL_S)
        print(f"{t:6.2f} s stuck: {why}\n  {scn.to_json(indent=None)}")
    seconds = time.perf_counter() - t0
    print(top(prof))
    print(json.dumps({"verbs_runs": done, "seconds": round(seconds, 2), "runs_per_second": round(done / seconds, 1),
                      "resources_before": before, "resources_after": resources()}))


def campaign(n: int, corpus: Path) -> None:
    t0 = time.perf_counter()
    import atheris  # noqa: F401  (what a job imports first)
    import numpy  # noqa: F401  (imported before the clock of instrumentation, as the harness's imports are)
    t_imports = time.perf_counter() - t0
    os.environ["EPFUZZ_BACKEND"] = "verbs"  # as the job's --backend=verbs: what the harness imports for verbs
    from epfuzz.continuous.harness import (
        Harness,  # nothing is line-instrumented (epfuzz.continuous.harness, issue 34.2)
    )
    t_instrument = time.perf_counter() - t0 - t_imports
    from epfuzz.backends import verbs_net
    from epfuzz.search.engines.libfuzzer import mutator
    from epfuzz.search.moves import Context

    tc_seconds = [0.0]
    shape = verbs_net.shape

    def timed_shape(*a: object, **k: object) -> None:
        t = time.perf_counter()
        try:
            shape(*a, **k)  # type: ignore[arg-type]
        finally:
            tc_seconds[0] += time.perf_counter() - t

    verbs_net.shape = timed_shape  # type: ignore[assignment]
    import epfuzz.backends.verbs_runner as runner
    runner.shape = timed_shape  # type: ignore[assignment]
    h = Harness(PROTOCOL, backend="verbs", keep_going=True, findings_dir=Path(tempfile.mkdtemp()))
    mutate = mutator(Context(h.protocol, h.proto, h.preset, sim=False))  # the harness's custom mutator
    pool = [p.read_bytes() for p in sorted(corpus.iterdir()) if p.is_file()]
    t1 = time.perf_counter()
    for data in pool:
        h.test_one_input(data)
    t_seeds = time.perf_counter() - t1
    tc_seeds, tc_seconds[0] = tc_seconds[0], 0.0
    rng = random.Random(1)
    prof = cProfile.Profile()
    t2 = time.perf_counter()
    prof.enable()
    for i in range(n):
        data = mutate(rng.choice(pool), 256, i)
        h.test_one_input(data)
        if rng.random() < 0.2:  # libFuzzer keeps inputs with new coverage; about this share in a campaign
            pool.append(data)
    prof.disable()
    t_mut = time.perf_counter() - t2
    print(top(prof, 30))
    print(json.dumps({
        "imports_s": round(t_imports, 1), "instrument_s": round(t_instrument, 1),
        "seeds": len([p for p in corpus.iterdir() if p.is_file()]), "seeds_s": round(t_seeds, 1),
        "seeds_tc_s": round(tc_seeds, 1), "mutated": n, "mutated_s": round(t_mut, 1),
        "mutated_exec_per_s": round(n / t_mut, 1), "mutated_tc_s": round(tc_seconds[0], 1),
        "findings": len(h.seen)}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", action="store_true", help="one campaign job's work instead of plain runs")
    ap.add_argument("n", nargs="?", type=int, default=60, metavar="N", help="inputs to run (default 60)")
    ap.add_argument("corpus", nargs="?", type=Path, default=ROOT / "corpus" / f"{PROTOCOL}_fuzzer",
                    metavar="CORPUS", help=f"a folder of inputs (default corpus/{PROTOCOL}_fuzzer)")
    a = ap.parse_args()
    (campaign if a.campaign else plain)(a.n, a.corpus)
