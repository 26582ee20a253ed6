#!/usr/bin/env python3
"""`make bench-search`: time-to-bug of four fuzzers, FuzzBench/Magma style.

    python bench/search.py [--budget S] [--trials N] [--first-seed K] [--jobs J] [--set deep|zoo|all] [NAME ...]
    python bench/search.py --merge A.json B.json --out bench/search-x   (one table from runs in parts)

Fuzzers, each from nothing (no seed corpus) with its trial number as the seed:
- `guided`: `epfuzz fuzz`'s default engine on the sim (epfuzz.search.engines.guided:
  semantic features as feedback, the schedule sampler as its main move, a share of
  fresh random inputs);
- `libfuzzer+feedback`: the harness under libFuzzer with the same semantic features
  as extra counters and the sampler as a mutator move (EPFUZZ_FEEDBACK=1),
  instrumenting as `--instrument` says (default: the decoder and the harness);
  not in the default set (slow to start, and slower than `guided` everywhere);
- `libfuzzer`: today's harness (line coverage of every epfuzz module, no
  semantic features, no sampler move);
- `random`: random bytes through the same decoder, in-process (bench/run.py's);
- `sampler`: a random configuration with a PCT-style schedule (epfuzz.sampler).
Every trial is a subprocess with a wall-clock budget. In-process fuzzers
(guided, random, sampler) start their clock after the imports; libFuzzer's
seconds include its start-up (2-3 s), as a user of it waits for it.
Writes bench/search.json and bench/search.md (figures, not assertions).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import stats  # noqa: E402

FUZZERS = ("guided", "libfuzzer+feedback", "libfuzzer", "random", "sampler")
DEFAULT_FUZZERS = ("guided", "libfuzzer", "random", "sampler")
IN_PROCESS = ("guided", "random", "sampler")
STAT = re.compile(r"stat::number_of_executed_units:\s+(\d+)")
#: the emulator, protocols, oracle and the feedback itself: atheris' exclude list takes exact module names
EMULATOR = ("epfuzz.sim", "epfuzz.protocols", "epfuzz.backends", "epfuzz.oracle", "epfuzz.payload",
            "epfuzz.ordering", "epfuzz.ops", "epfuzz.feedback", "epfuzz.sampler")


def _modules(prefixes: tuple[str, ...]) -> list[str]:
    import pkgutil

    import epfuzz

    names = [m.name for m in pkgutil.walk_packages(epfuzz.__path__, "epfuzz.")]
    return sorted(n for n in names if n.startswith(prefixes))


INSTRUMENT = {"all": lambda: 'include=["epfuzz"]',
              "nosim": lambda: f'include=["epfuzz"], exclude={_modules(EMULATOR)!r}',
              "none": lambda: 'include=["epfuzz_nothing"]'}
DRIVER = '''import sys
import atheris
with atheris.instrument_imports({instrument}):
    from epfuzz.harness import main
main({protocol!r}, sys.argv)
'''


def in_process(kind: str, name: str, seed: int, budget: float) -> dict[str, Any]:
    """guided, random or sampler: executions until the first finding, within `budget` seconds."""
    from epfuzz import codec
    from epfuzz.protocols import REGISTRY, get_protocol
    from epfuzz.sampler import SamplerSearch
    from epfuzz.search.engines.guided import Guided
    from epfuzz.sim.engine import simulate

    proto = REGISTRY.load_plugin(name) if ":" in name else get_protocol(name)  # a plug-in: module:Attr
    rng = random.Random(seed)
    sampler = SamplerSearch(name, proto, seed) if kind == "sampler" else None
    loop = Guided(name, proto, seed) if kind == "guided" else None
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < budget:
        n += 1
        if loop is not None:
            bad = loop.step().run.violation is not None
        else:
            scn = sampler.next_scenario() if sampler else codec.decode(rng.randbytes(rng.randrange(0, 129)), name)
            bad = simulate(scn, proto).violation is not None
        if bad:
            return {"execs": n, "seconds": time.perf_counter() - t0, "found": True}
    return {"execs": n, "seconds": budget, "found": False}


def libfuzzer(kind: str, name: str, seed: int, budget: float, instrument: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        if kind == "libfuzzer+feedback":
            script = Path(tmp) / f"{name}_guided.py"
            script.write_text(DRIVER.format(instrument=INSTRUMENT[instrument](), protocol=name))
            env["EPFUZZ_FEEDBACK"] = "1"
        else:
            script = ROOT / "harnesses" / f"{name}_fuzzer.py"
            env.pop("EPFUZZ_FEEDBACK", None)
        # a plug-in protocol (module:Attr) has no harness script: the plug-in harness runs it (issue 34.7)
        cmd = [sys.executable, str(script)] if ":" not in name else [sys.executable, "-m", "epfuzz.plugin_fuzzer",
                                                                     f"--protocol={name}"]
        t0 = time.perf_counter()
        try:
            p = subprocess.run([*cmd, str(work), f"-artifact_prefix={tmp}/", f"-seed={seed}",
                                f"-max_total_time={int(budget)}", "-print_final_stats=1"],
                               capture_output=True, text=True, timeout=budget + 120, env=env)
            err = p.stderr
        except subprocess.TimeoutExpired as e:
            err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        wall = time.perf_counter() - t0
        found = any(Path(tmp).glob("crash-*"))
    m = STAT.search(err)
    if m is None and not found:  # the harness never fuzzed: an error, not a trial of zero executions (34.7)
        tail = " | ".join(err.strip().splitlines()[-3:]) or "no output"
        raise SystemExit(f"bench/search.py: {kind} on {name} (seed {seed}) ran no executions: {tail}")
    return {"execs": int(m.group(1)) if m else 0, "seconds": min(wall, budget) if not found else wall,
            "found": found, "false_alarm": "FALSE ALARM" in err}


def one_trial(kind: str, name: str, seed: int, budget: float, instrument: str) -> dict[str, Any]:
    if kind in IN_PROCESS:
        p = subprocess.run([sys.executable, __file__, "--one", kind, name, str(seed), str(budget)],
                           capture_output=True, text=True, timeout=budget + 120)
        r = json.loads(p.stdout.strip().splitlines()[-1])
    else:
        r = libfuzzer(kind, name, seed, budget, instrument)
    r.update(fuzzer=kind, bug=name, seed=seed)
    print(f"  {kind:18} {name} seed {seed}: {'found' if r['found'] else 'none'} after {r['execs']} execs, "
          f"{r['seconds']:.1f} s", flush=True)
    return r


def bugs(which: str) -> list[str]:
    from epfuzz.protocols import ZOO
    from epfuzz.protocols.deep import DEEP_ZOO

    deep = [z[2] for z in DEEP_ZOO]
    zoo = [z[2] for z in ZOO]
    return {"deep": deep, "zoo": zoo, "all": deep + zoo}[which]


def summarize(trials: list[dict[str, Any]], budget: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (bug, kind) in sorted({(t["bug"], t["fuzzer"]) for t in trials}):
        rs = [t for t in trials if t["bug"] == bug and t["fuzzer"] == kind]
        secs = [t["seconds"] if t["found"] else budget for t in rs]
        base = [t["seconds"] if t["found"] else budget for t in trials if t["bug"] == bug and t["fuzzer"] == "random"]
        out.setdefault(bug, {})[kind] = {
            "found": sum(t["found"] for t in rs), "trials": len(rs),
            "median_execs": statistics.median(t["execs"] for t in rs),
            "median_seconds": round(statistics.median(secs), 2),
            "rmst_seconds": round(stats.km_rmst([t["seconds"] for t in rs], [t["found"] for t in rs], budget), 2),
            "p_vs_random": None if kind == "random" else stats.mann_whitney_p(secs, base),
            "a12_vs_random": None if kind == "random" else round(stats.a12(secs, base), 3),
            "false_alarms": sum(bool(t.get("false_alarm")) for t in rs)}
    return out


def render(res: dict[str, Any]) -> str:
    c = res["config"]
    lines = [f"Search benchmark, {res['date']}, {res['machine']}: {c['trials']} trials per (bug, fuzzer), "
             f"{c['budget']} s each, {c['jobs']} at a time, libfuzzer+feedback instrumentation `{c['instrument']}`."
             + (f" {c['note']}" if c.get("note") else ""), "",
             "Median executions and seconds to the bug (censored trials count as the budget: `>`), Kaplan-Meier "
             "RMST in seconds, Mann-Whitney U p and Vargha-Delaney A12 of seconds against random "
             "(A12 > 0.5: faster than random).", "",
             "| bug | fuzzer | found | median execs | median s | RMST s | p vs random | A12 vs random |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for bug, row in res["summary"].items():
        for kind in FUZZERS:
            if kind not in row:
                continue
            r = row[kind]
            cens = ">" if r["found"] * 2 <= r["trials"] else ""
            p = "-" if r["p_vs_random"] is None else f"{r['p_vs_random']:.3g}"
            a = "-" if r["a12_vs_random"] is None else f"{r['a12_vs_random']:.2f}"
            lines.append(f"| `{bug}` | {kind} | {r['found']}/{r['trials']} | {cens}{r['median_execs']:.0f} | "
                         f"{cens}{r['median_seconds']} | {r['rmst_seconds']} | {p} | {a} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--budget", type=float, default=300)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1,
                    help="seeds run from here (add trials to an earlier run, then --merge both)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--set", default="all", choices=("deep", "zoo", "all"))
    ap.add_argument("--fuzzers", default=",".join(DEFAULT_FUZZERS), help=f"comma-separated, of {', '.join(FUZZERS)}")
    ap.add_argument("--instrument", default="nosim", choices=sorted(INSTRUMENT))
    ap.add_argument("--out", default=str(ROOT / "bench" / "search"))
    ap.add_argument("--note", default="", help="a sentence for the table's header (where and how it ran)")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="no trials: summarize the trials of these result files together (one run split in parts)")
    a = ap.parse_args()
    names = a.names or bugs(a.set)
    kinds = a.fuzzers.split(",")
    if a.merge:
        parts = [json.loads(Path(f).read_text()) for f in a.merge]
        trials = [t for part in parts for t in part["trials"]]
        keys = [(t["bug"], t["fuzzer"], t["seed"]) for t in trials]
        if len(set(keys)) < len(keys):
            raise SystemExit("--merge: the same (bug, fuzzer, seed) trial is in two parts: run the second part "
                             "with --first-seed past the first")
        if len({part["config"]["budget"] for part in parts}) > 1:
            raise SystemExit("--merge: the parts ran at different budgets; a table has one budget")
        a.budget = parts[0]["config"]["budget"]
        kinds = sorted({t["fuzzer"] for t in trials}, key=FUZZERS.index)
        machine, a.jobs = parts[0]["machine"], parts[0]["config"]["jobs"]
        a.trials = max(sum(1 for t in trials if (t["bug"], t["fuzzer"]) == key)
                       for key in {(t["bug"], t["fuzzer"]) for t in trials})
    else:
        jobs = [(k, n, s) for s in range(a.first_seed, a.first_seed + a.trials) for n in names for k in kinds]
        with ThreadPoolExecutor(a.jobs) as pool:
            trials = list(pool.map(lambda j: one_trial(*j, a.budget, a.instrument), jobs))
        machine = f"{platform.machine()} python {platform.python_version()}, {os.cpu_count()} cores"
    res = {"date": time.strftime("%Y-%m-%d"), "machine": machine,
           "config": {"budget": a.budget, "trials": a.trials, "jobs": a.jobs, "instrument": a.instrument,
                      "fuzzers": kinds, "note": a.note},
           "summary": summarize(trials, a.budget), "trials": trials}
    Path(a.out + ".json").write_text(json.dumps(res, indent=1) + "\n")
    Path(a.out + ".md").write_text(render(res))
    print(render(res))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        kind, name, seed, budget = sys.argv[2:6]
        print(json.dumps(in_process(kind, name, int(seed), float(budget))))
        raise SystemExit(0)
    raise SystemExit(main())
