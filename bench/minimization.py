#!/usr/bin/env python3
"""Structural minimizer vs libFuzzer's -minimize_crash=1 on a fuzz-found DeepEP #661 finding.

Finds the bug with the harness (fixed seed), then minimizes the crash input both
ways and reports input bytes before/after, the scenario's size in RDMA terms, and
wall time. Writes bench/minimization.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from epfuzz.cases.corpus import write_atomic
from epfuzz.encoding import codec
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol
from epfuzz.triage.minimize import minimize

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.quality.test_shrink_quality import BIG_661 as NOISY_661  # noqa: E402

HARNESS = ROOT / "harnesses" / "deepep_v2_dispatch_fuzzer.py"
PROTO = "deepep_v2_dispatch"


def shape(s: Scenario) -> dict[str, int]:
    return {"channels": s.topology.num_channels, "qps": s.topology.num_qps, "tokens": s.payload.num_tokens,
            "epochs": s.payload.epochs, "slot_bytes": s.payload.hidden_bytes + s.payload.scale_bytes
            + s.payload.meta_bytes, "overtakes": len(s.schedule), "spins": len(s.faults.spins)}


def compare(data: bytes, lf: bytes, lf_time: float, proto: str) -> dict[str, object]:
    before = codec.decode(data, proto)
    t0 = time.perf_counter()
    m = minimize(before, get_protocol(before.protocol))
    ours_time = time.perf_counter() - t0
    return {
        "found": {"bytes": len(data), "shape": shape(before)},
        "libfuzzer_minimize_crash": {"bytes": len(lf), "seconds": round(lf_time, 1),
                                     "shape": shape(codec.decode(lf, proto))},
        "epfuzz_minimize": {"bytes": len(codec.encode(m.result)), "seconds": round(ours_time, 2),
                            "candidate_runs": m.runs, "shape": shape(m.result)},
    }


def main(seed: int = 5) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "work").mkdir()
        subprocess.run([sys.executable, str(HARNESS), str(t / "work"), f"-artifact_prefix={t}/", f"-seed={seed}",
                        "-runs=50000"], capture_output=True, timeout=900)
        crash = next(t.glob("crash-*"))
        data = crash.read_bytes()
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, str(HARNESS), "-minimize_crash=1", "-runs=20000",
                            f"-exact_artifact_path={t / 'lf-min'}", str(crash)], capture_output=True, timeout=900)
        lf_time = time.perf_counter() - t0
        lf = (t / "lf-min").read_bytes() if (t / "lf-min").exists() else data
        del p
    res = {"fuzz_found": compare(data, lf, lf_time, PROTO),
           "noisy_661": None}
    noisy = codec.load_dict(NOISY_661)
    nd = codec.encode(noisy)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "crash").write_bytes(nd)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(HARNESS), "-minimize_crash=1", "-runs=20000", "--preset=spec",
                        f"-exact_artifact_path={t / 'lf-min'}", str(t / "crash")], capture_output=True, timeout=900)
        lf_time = time.perf_counter() - t0
        lf = (t / "lf-min").read_bytes() if (t / "lf-min").exists() else nd
    res["noisy_661"] = compare(nd, lf, lf_time, PROTO)
    write_atomic(ROOT / "bench" / "minimization.json", (json.dumps(res, indent=2) + "\n").encode())
    return res


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0],
                            epilog="No options: finds the bug (libFuzzer, seed 5), minimizes both ways and rewrites "
                                   "bench/minimization.json (minutes).").parse_args()
    print(json.dumps(main(), indent=2))
