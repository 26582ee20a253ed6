#!/usr/bin/env python3
"""`make bench-search`: time-to-bug of four fuzzers, FuzzBench/Magma style.

    python bench/search.py [--execs N] [--budget S] [--trials N] [--first-seed K] [--jobs J]
                           [--set deep|deep2|zoo|all] [--fuzzers F,...] [NAME ...]
    python bench/search.py --merge A.json B.json --out bench/search-x   (one table from runs in parts)

Fuzzers, each from nothing (no seed corpus) with its trial number as the seed:
- `guided`: `epfuzz fuzz --engine guided`'s in-process greybox loop (epfuzz.greybox:
  semantic features as feedback, the schedule sampler as its main move, a share of
  fresh random inputs);
- `libfuzzer+feedback`: the harness under libFuzzer with the same semantic features
  as extra counters and the sampler as a mutator move (EPFUZZ_FEEDBACK=1),
  instrumenting as `--instrument` says (default: the decoder and the harness);
  not in the default set (slow to start, and slower than `guided` everywhere);
- `libfuzzer`: today's harness (line coverage of every epfuzz module, no
  semantic features, no sampler move);
- `random`: random bytes through the same decoder, in-process (bench/run.py's);
- `sampler`: a random configuration with a PCT-style schedule (epfuzz.sampler);
- `libfuzzer-cfl`: the harness file itself as .clusterfuzzlite/build.sh compiles it
  (harnesses/<name>_fuzzer.py), run with -runs=N and -max_total_time; its seconds include
  start-up. A trial of it with zero executions is an error, not a result (issue 34.7).

Sets: `deep` (epfuzz.protocols.deep), `deep2` (epfuzz.protocols.deep2: other defences than the
trailer check, issue 27), `zoo` (the shallow zoo), `all` (the three).

With `--execs N` a trial is bounded by N executions (the seconds budget stays as a backstop) and
the statistics are computed on executions: median, Kaplan-Meier RMST with censored trials at N,
Mann-Whitney p and A12 against random; median seconds are reported beside them.

The full run for issue 27's targets (after the search rewrite merges; not committed from a smoke run):

    python bench/search.py --set all --trials 20 --execs 20000 --budget 900 \
        --fuzzers guided,sampler,random,libfuzzer-cfl --jobs 2 --out bench/search-issue27

(bench/docs_tables.py renders bench/search-issue27.json into docs/benchmarks.md once it exists.)

Cost estimate (smoke run on the 2-core dev machine, December 2026): the in-process fuzzers run at
~150-650 executions/s on the deep sets, libFuzzer at ~100-300/s plus 2-3 s start-up per trial; a
trial stops at its first finding, so found bugs cost little and censored trials cost N executions.
28 bugs x 4 fuzzers x 20 trials = 2,240 trials; with random censored on most deep bugs (20,000
executions at ~200/s = 100 s each) and the others finding within ~1,000, expect roughly
(28 x 20 x 100 s for random + 28 x 3 x 20 x ~10 s) / 2 jobs = about 10 hours.
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

FUZZERS = ("guided", "libfuzzer+feedback", "libfuzzer", "libfuzzer-cfl", "random", "sampler")
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


def in_process(kind: str, name: str, seed: int, budget: float, execs: int = 0) -> dict[str, Any]:
    """guided, random or sampler: executions until the first finding, within `execs` executions (0: no
    bound) and `budget` seconds."""
    from epfuzz import codec
    from epfuzz.greybox import Greybox
    from epfuzz.protocols import get_protocol
    from epfuzz.sampler import SamplerSearch
    from epfuzz.sim.engine import simulate

    proto = get_protocol(name)
    rng = random.Random(seed)
    sampler = SamplerSearch(name, proto, seed) if kind == "sampler" else None
    loop = Greybox(name, proto, seed) if kind == "guided" else None
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < budget and (not execs or n < execs):
        n += 1
        if loop is not None:
            bad = loop.step().run.violation is not None
        else:
            scn = sampler.next_scenario() if sampler else codec.decode(rng.randbytes(rng.randrange(0, 129)), name)
            bad = simulate(scn, proto).violation is not None
        if bad:
            return {"execs": n, "seconds": time.perf_counter() - t0, "found": True}
    return {"execs": n, "seconds": time.perf_counter() - t0, "found": False}


def libfuzzer(kind: str, name: str, seed: int, budget: float, instrument: str, execs: int = 0) -> dict[str, Any]:
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
        t0 = time.perf_counter()
        try:
            runs = [f"-runs={execs}"] if execs else []
            p = subprocess.run([sys.executable, str(script), str(work), f"-artifact_prefix={tmp}/", f"-seed={seed}",
                                f"-max_total_time={int(budget)}", *runs, "-print_final_stats=1"],
                               capture_output=True, text=True, timeout=budget + 120, env=env)
            err = p.stderr
        except subprocess.TimeoutExpired as e:
            err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        wall = time.perf_counter() - t0
        found = any(Path(tmp).glob("crash-*"))
    m = STAT.search(err)
    out = {"execs": int(m.group(1)) if m else 0, "seconds": min(wall, budget) if not found else wall,
           "found": found, "false_alarm": "FALSE ALARM" in err}
    if kind == "libfuzzer-cfl" and not out["execs"]:  # issue 34.7: no executions is no measurement
        tail = " | ".join(err.strip().splitlines()[-3:])
        raise SystemExit(f"libfuzzer-cfl {name} seed {seed}: the harness ran zero executions: {tail}")
    return out


def one_trial(kind: str, name: str, seed: int, budget: float, instrument: str, execs: int = 0) -> dict[str, Any]:
    if kind in IN_PROCESS:
        p = subprocess.run([sys.executable, __file__, "--one", kind, name, str(seed), str(budget), str(execs)],
                           capture_output=True, text=True, timeout=budget + 120)
        r = json.loads(p.stdout.strip().splitlines()[-1])
    else:
        r = libfuzzer(kind, name, seed, budget, instrument, execs)
    r.update(fuzzer=kind, bug=name, seed=seed)
    print(f"  {kind:18} {name} seed {seed}: {'found' if r['found'] else 'none'} after {r['execs']} execs, "
          f"{r['seconds']:.1f} s", flush=True)
    return r


def bugs(which: str) -> list[str]:
    from epfuzz.protocols import ZOO
    from epfuzz.protocols.deep import DEEP_ZOO
    from epfuzz.protocols.deep2 import DEEP2_ZOO

    deep = [z[2] for z in DEEP_ZOO]
    deep2 = [z[2] for z in DEEP2_ZOO]
    zoo = [z[2] for z in ZOO]
    return {"deep": deep, "deep2": deep2, "zoo": zoo, "all": deep + deep2 + zoo}[which]


def summarize(trials: list[dict[str, Any]], budget: float, execs: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (bug, kind) in sorted({(t["bug"], t["fuzzer"]) for t in trials}):
        rs = [t for t in trials if t["bug"] == bug and t["fuzzer"] == kind]
        # censored at the seconds budget; under an executions budget a censored trial took what it took
        secs = [t["seconds"] if t["found"] or execs else budget for t in rs]
        base = [t["seconds"] if t["found"] or execs else budget
                for t in trials if t["bug"] == bug and t["fuzzer"] == "random"]
        out.setdefault(bug, {})[kind] = {
            "found": sum(t["found"] for t in rs), "trials": len(rs),
            "median_execs": statistics.median(t["execs"] for t in rs),
            "median_seconds": round(statistics.median(secs), 2),
            "rmst_seconds": round(stats.km_rmst([t["seconds"] for t in rs], [t["found"] for t in rs], budget), 2),
            "p_vs_random": None if kind == "random" else stats.mann_whitney_p(secs, base),
            "a12_vs_random": None if kind == "random" else round(stats.a12(secs, base), 3),
            "false_alarms": sum(bool(t.get("false_alarm")) for t in rs)}
        if execs:  # the statistics in executions, censored at the executions budget
            ex = [t["execs"] if t["found"] else execs for t in rs]
            bex = [t["execs"] if t["found"] else execs for t in trials if t["bug"] == bug and t["fuzzer"] == "random"]
            out[bug][kind].update(
                rmst_execs=round(stats.km_rmst(ex, [t["found"] for t in rs], execs), 1),
                p_execs_vs_random=None if kind == "random" or not bex else stats.mann_whitney_p(ex, bex),
                a12_execs_vs_random=None if kind == "random" or not bex else round(stats.a12(ex, bex), 3))
    return out


def render(res: dict[str, Any]) -> str:
    c = res["config"]
    lines = [f"Search benchmark, {res['date']}, {res['machine']}: {c['trials']} trials per (bug, fuzzer), "
             f"{c['budget']} s each, {c['jobs']} at a time, libfuzzer+feedback instrumentation `{c['instrument']}`."
             + (f" {c['note']}" if c.get("note") else ""), "",
             "Median executions and seconds to the bug (censored trials count as the budget: `>`), Kaplan-Meier "
             "RMST in seconds, Mann-Whitney U p and Vargha-Delaney A12 of seconds against random "
             "(A12 > 0.5: faster than random).", "",
             "| bug | fuzzer | found | median execs | median s | RMST s | p vs random | A12 vs random |"
             + (" RMST execs | p execs | A12 execs |" if c.get("execs") else ""),
             "| --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- | --- | --- |" if c.get("execs") else "")]
    for bug, row in res["summary"].items():
        for kind in FUZZERS:
            if kind not in row:
                continue
            r = row[kind]
            cens = ">" if r["found"] * 2 <= r["trials"] else ""
            p = "-" if r["p_vs_random"] is None else f"{r['p_vs_random']:.3g}"
            a = "-" if r["a12_vs_random"] is None else f"{r['a12_vs_random']:.2f}"
            line = (f"| `{bug}` | {kind} | {r['found']}/{r['trials']} | {cens}{r['median_execs']:.0f} | "
                    f"{cens}{r['median_seconds']} | {r['rmst_seconds']} | {p} | {a} |")
            if c.get("execs"):
                pe = "-" if r.get("p_execs_vs_random") is None else f"{r['p_execs_vs_random']:.3g}"
                ae = "-" if r.get("a12_execs_vs_random") is None else f"{r['a12_execs_vs_random']:.2f}"
                line += f" {r.get('rmst_execs', '-')} | {pe} | {ae} |"
            lines.append(line)
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--budget", type=float, default=300)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1,
                    help="seeds run from here (add trials to an earlier run, then --merge both)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--execs", type=int, default=0, help="executions per trial (0: seconds only)")
    ap.add_argument("--set", default="all", choices=("deep", "deep2", "zoo", "all"))
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
        a.execs = parts[0]["config"].get("execs", 0)
        kinds = sorted({t["fuzzer"] for t in trials}, key=FUZZERS.index)
        machine, a.jobs = parts[0]["machine"], parts[0]["config"]["jobs"]
        a.trials = max(sum(1 for t in trials if (t["bug"], t["fuzzer"]) == key)
                       for key in {(t["bug"], t["fuzzer"]) for t in trials})
    else:
        jobs = [(k, n, s) for s in range(a.first_seed, a.first_seed + a.trials) for n in names for k in kinds]
        with ThreadPoolExecutor(a.jobs) as pool:
            trials = list(pool.map(lambda j: one_trial(*j, a.budget, a.instrument, a.execs), jobs))
        machine = f"{platform.machine()} python {platform.python_version()}, {os.cpu_count()} cores"
    res = {"date": time.strftime("%Y-%m-%d"), "machine": machine,
           "config": {"budget": a.budget, "execs": a.execs, "trials": a.trials, "jobs": a.jobs,
                      "instrument": a.instrument,
                      "fuzzers": kinds, "note": a.note},
           "summary": summarize(trials, a.budget, a.execs), "trials": trials}
    Path(a.out + ".json").write_text(json.dumps(res, indent=1) + "\n")
    Path(a.out + ".md").write_text(render(res))
    print(render(res))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        kind, name, seed, budget, execs = (*sys.argv[2:7], "0")[:5]
        print(json.dumps(in_process(kind, name, int(seed), float(budget), int(execs))))
        raise SystemExit(0)
    raise SystemExit(main())
