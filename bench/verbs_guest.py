#!/usr/bin/env python3
"""Where a verbs run's time goes, inside the soft-RoCE guest (issue 19's throughput).

    epfuzz vm run -- python3 bench/verbs_guest.py [N [CORPUS]]

Runs N inputs of dispatch_any (the seed corpus, or CORPUS, as a campaign decodes them)
through the verbs backend once each, prints executions per second, the slowest inputs and
what they ask for, the top of a cProfile of those runs, and the kernel's count of QPs and
MRs before and after (do runs release their verbs resources?).
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import subprocess
import sys
import time
from pathlib import Path

from epfuzz import codec
from epfuzz.backends import get_backend
from epfuzz.errors import Unsupported
from epfuzz.protocols import get_protocol

ROOT = Path(__file__).resolve().parent.parent


def resources() -> dict[str, int]:
    out = {}
    for kind in ("qp", "mr", "cq", "pd"):
        p = subprocess.run(["rdma", "resource", "show", kind], capture_output=True, text=True)
        out[kind] = len([x for x in p.stdout.splitlines() if x.strip()])
    return out


def main(n: int, corpus: Path) -> None:
    proto = get_protocol("dispatch_any")
    seeds = sorted(p for p in corpus.iterdir() if p.is_file())
    inputs = [codec.decode(p.read_bytes(), "dispatch_any", "spec") for p in seeds]
    b = get_backend("verbs")
    b.run(inputs[0], proto)  # devices and the rxe pair come up outside the measurement
    before = resources()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    done = 0
    slow = []
    prof.enable()
    for scn in (inputs * (n // len(inputs) + 1))[:n]:
        t = time.perf_counter()
        try:
            out = b.run(scn, proto)
        except Unsupported:
            continue
        slow.append((time.perf_counter() - t, out.verdict, scn))
        done += 1
    prof.disable()
    for t, verdict, scn in sorted(slow, key=lambda x: -x[0])[:8]:
        f = scn.faults
        print(f"{t:6.2f} s {verdict:8s} epochs {scn.payload.epochs} tokens {scn.payload.num_tokens} "
              f"qps {scn.topology.num_qps} delay {list(f.qp_delay_ns)} div {list(f.qp_rate_div)} "
              f"port {f.port_rate_div} spins {len(f.spins)} signal {scn.signal.kind}")
    seconds = time.perf_counter() - t0
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
    print(s.getvalue())
    print(json.dumps({"verbs_runs": done, "seconds": round(seconds, 2), "runs_per_second": round(done / seconds, 1),
                      "resources_before": before, "resources_after": resources()}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60,
         Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "corpus" / "dispatch_any_fuzzer")
