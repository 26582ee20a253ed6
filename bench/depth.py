#!/usr/bin/env python3
"""How deep is a bug for random inputs through the decoder?

    python bench/depth.py [--seeds 20] [--cap 200000] [--jobs N] NAME...        # execs-to-bug per seed
    python bench/depth.py --rate 40000 NAME...                                  # hit rate per execution
    python bench/depth.py --render                        # bench/depth.md again from bench/depth.json

The random baseline is bench/run.py's: each execution decodes 0-128 random bytes
(seeded per trial) into a scenario of the protocol and runs it on the sim. A bug is
"deep" when the median over the seeds exceeds 10,000 executions; censored trials
(no find within --cap) count as the cap, which only understates the median. With
--stop-when-decided, a protocol gets no more trials once more than half of --seeds
trials ran to the cap without a find: its median is then known to exceed the cap
(the saving that makes 20-seed medians affordable on two cores).
Writes bench/depth.json (merged by name) unless --no-write.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import re
import statistics
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epfuzz.cases.corpus import write_atomic  # noqa: E402
from epfuzz.encoding import codec  # noqa: E402
from epfuzz.infra.errors import EpfuzzError  # noqa: E402
from epfuzz.protocols import get_protocol  # noqa: E402
from epfuzz.sim.engine import simulate  # noqa: E402

OUT = ROOT / "bench" / "depth.json"


def _load(extra: str | None) -> None:
    if extra:
        importlib.import_module(extra)


def trial(args: tuple[str, int, int, str | None]) -> tuple[str, int, int, bool, float]:
    """One random trial: executions until the first finding (or the cap)."""
    name, seed, cap, extra = args
    _load(extra)
    rng = random.Random(seed)
    proto = get_protocol(name)
    t0 = time.perf_counter()
    for i in range(1, cap + 1):
        data = rng.randbytes(rng.randrange(0, 129))
        if simulate(codec.decode(data, name), proto).violation is not None:
            return name, seed, i, True, time.perf_counter() - t0
    return name, seed, cap, False, time.perf_counter() - t0


def rate(args: tuple[str, int, int, str | None]) -> tuple[str, int, int]:
    name, seed, n, extra = args
    _load(extra)
    rng = random.Random(1_000_003 * seed + 7)
    proto = get_protocol(name)
    hits = sum(simulate(codec.decode(rng.randbytes(rng.randrange(0, 129)), name), proto).violation is not None
               for _ in range(n))
    return name, hits, n


LOG_LINE = re.compile(r"^  (\w+) seed (\d+): (\d+) execs, found (True|False), ([\d.]+) s$", re.M)


def _resumed(log: str | None, names: list[str], cap: int) -> list[tuple[str, int, int, bool, float]]:
    if not log:
        return []
    out = []
    for name, seed, execs, found, secs in LOG_LINE.findall(Path(log).read_text()):
        if name in names and (found == "True" or int(execs) == cap):
            out.append((name, int(seed), int(execs), found == "True", float(secs)))
    return out


def tabulate_log(a: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    res: dict[str, list[dict[str, Any]]] = {n: [] for n in a.names}
    for name, seed, execs, found, secs in _resumed(a.resume, a.names, a.cap):
        res[name].append({"seed": seed, "execs": execs, "found": found, "seconds": secs})
    return res


def run_trials(pool: ProcessPoolExecutor, a: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Seed-major, a few in flight, so an interrupted run has some seeds of every protocol."""
    todo = [(n, s) for s in range(1, a.seeds + 1) for n in a.names]
    res: dict[str, list[dict[str, Any]]] = {n: [] for n in a.names}
    censored = dict.fromkeys(a.names, 0)
    for name, seed, execs, found, secs in _resumed(a.resume, a.names, a.cap):
        todo.remove((name, seed))
        censored[name] += not found
        res[name].append({"seed": seed, "execs": execs, "found": found, "seconds": secs})
    flight: dict[Future[Any], str] = {}

    def decided(name: str) -> bool:
        return a.stop_when_decided and censored[name] > a.seeds // 2

    while todo or flight:
        while todo and len(flight) < a.jobs:
            name, seed = todo.pop(0)
            if not decided(name):
                flight[pool.submit(trial, (name, seed, a.cap, a.extra))] = name
        if not flight:
            break
        done, _ = wait(flight, return_when=FIRST_COMPLETED)
        for fut in done:
            flight.pop(fut)
            name, seed, execs, found, secs = fut.result()
            censored[name] += not found
            res[name].append({"seed": seed, "execs": execs, "found": found, "seconds": round(secs, 2)})
            print(f"  {name} seed {seed}: {execs} execs, found {found}, {secs:.1f} s", flush=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="bad protocols (at least one, unless --render)")
    ap.add_argument("--render", action="store_true", help="only re-render bench/depth.md from bench/depth.json")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--cap", type=int, default=200_000)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rate", type=int, default=0, help="estimate the hit rate from this many executions")
    ap.add_argument("--extra", help="module to import first (registers more protocols)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--stop-when-decided", action="store_true")
    ap.add_argument("--resume", help="a log of an earlier run: its finished trials are kept, not rerun")
    ap.add_argument("--from-log", action="store_true", help="with --resume: only tabulate the log, run nothing")
    a = ap.parse_args()
    if a.render:
        if a.names:
            ap.error("--render takes no protocol names")
        write_atomic(OUT.with_suffix(".md"), render(json.loads(OUT.read_text())).encode())
        return 0
    if not a.names:
        ap.error("the following arguments are required: NAME")
    _load(a.extra)
    for n in a.names:  # a misspelt name is one line, before any trial runs
        try:
            get_protocol(n)
        except EpfuzzError as e:
            ap.error(str(e))
    with ProcessPoolExecutor(a.jobs) as pool:
        if a.rate:
            per = max(1, a.rate // a.jobs)
            jobs = [(n, s, per, a.extra) for n in a.names for s in range(a.jobs)]
            totals: dict[str, list[int]] = {n: [0, 0] for n in a.names}
            for name, hits, n in pool.map(rate, jobs):
                totals[name][0] += hits
                totals[name][1] += n
            for name, (hits, n) in totals.items():
                print(f"{name}: {hits} / {n} = {hits / n:.2e}", flush=True)
            return 0
        res = tabulate_log(a) if a.from_log else run_trials(pool, a)
    table = {}
    for name, runs in res.items():
        # trials not run after the decision would each have been >= the cap; an interrupted
        # run (a log cut short) is tabulated over the trials it has, and says so
        decided = sum(not r["found"] for r in runs) > a.seeds // 2
        execs = [r["execs"] for r in runs] + ([a.cap] * (a.seeds - len(runs)) if decided else [])
        table[name] = {"median_execs": statistics.median(execs), "found": sum(r["found"] for r in runs),
                       "trials": len(runs), "cap": a.cap, "min": min(execs), "max": max(execs),
                       "median_seconds": statistics.median(r["seconds"] for r in runs),
                       "date": time.strftime("%Y-%m-%d"), "runs": runs}
        t = table[name]
        t["decided_early"] = len(runs) < a.seeds and decided
        t["trials_run"] = len(runs)
        t["seeds"] = a.seeds
        print(f"{name}: median {t['median_execs']} execs [{t['min']}-{t['max']}], found {t['found']}/{t['trials']}"
              f" (cap {a.cap}), median {t['median_seconds']:.1f} s", flush=True)
    if not a.no_write:
        old = json.loads(OUT.read_text()) if OUT.exists() else {}
        old.update(table)
        write_atomic(OUT, (json.dumps(old, indent=1) + "\n").encode())
        write_atomic(OUT.with_suffix(".md"), render(old).encode())
    return 0


def render(table: dict[str, Any]) -> str:
    """The depth table (docs/zoo.md): random inputs through the decoder, per bad protocol."""
    lines = ["| bad protocol | random: median execs (seeds found / run, cap) | min-max found | median s | date |",
             "| --- | --- | --- | --- | --- |"]
    for name, t in table.items():
        found = [r["execs"] for r in t["runs"] if r["found"]]
        med = f"> {t['cap']:,}" if t["median_execs"] >= t["cap"] else f"{t['median_execs']:,.0f}"
        seeds = t.get("seeds", len(t["runs"]))
        if len(t["runs"]) < seeds and not t.get("decided_early"):
            med += f" (partial: {len(t['runs'])} of {seeds} seeds)"
        rng = f"{min(found):,}-{max(found):,}" if found else "-"
        lines.append(f"| `{name}` | {med} ({t['found']}/{len(t['runs'])}, cap {t['cap']:,}) | {rng} | "
                     f"{t['median_seconds']:.0f} | {t['date']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
