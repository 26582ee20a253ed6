#!/usr/bin/env python3
"""Benchmarks: emulator throughput on one core (writes bench/results.json and bench/results.md).

Throughput is measured on scenarios decoded from random bytes (fixed seed), which
is what a fuzzing run executes, and on the DeepEP #661 seed scenario. Numbers
are figures to quote, never assertions: a noisy machine must not fail a build.
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from epfuzz.scenario import Scenario
from epfuzz.seeds import SEED_661
from epfuzz.sim.engine import simulate

OUT = Path(__file__).resolve().parent


def throughput(inputs: list[bytes], protocol: str, seconds: float) -> dict[str, float]:
    n = 0
    t0 = time.perf_counter()
    sizes = []
    while time.perf_counter() - t0 < seconds:
        for data in inputs:
            run = simulate(Scenario.from_bytes(data, protocol))
            sizes.append(len(run.packets))
            n += 1
    dt = time.perf_counter() - t0
    return {"execs": n, "seconds": round(dt, 2), "exec_per_s": round(n / dt),
            "median_packets": statistics.median(sizes)}


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    rng = random.Random(1)
    inputs = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 96))) for _ in range(500)]
    seed = Scenario.from_dict(SEED_661)
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {platform.processor() or ''} python {platform.python_version()}".strip(),
        "random_scenarios": throughput(inputs, "dispatch_any", seconds),
        "deepep661_seed": throughput([seed.to_bytes()], seed.protocol, seconds / 2),
    }
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    r, s = results["random_scenarios"], results["deepep661_seed"]
    md = (f"Measured {results['date']} on {results['machine']} (one core).\n\n"
          "| workload | exec/s | median packets/run |\n| --- | --- | --- |\n"
          f"| random fuzz-decoded scenarios (dispatch_any) | {r['exec_per_s']} | {r['median_packets']} |\n"
          f"| DeepEP #661 seed scenario | {s['exec_per_s']} | {s['median_packets']} |\n")
    (OUT / "results.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
