#!/usr/bin/env python3
"""`make bench-search`: time-to-bug of four fuzzers, FuzzBench/Magma style, in executions and seconds.

    python bench/search.py [--execs N] [--budget S] [--trials N] [--first-seed K] [--jobs J]
                           [--set deep|deep2|zoo|all] [--fuzzers F,...] [--resume] [NAME ...]
    python bench/search.py --merge A.json B.json --out bench/search-x   (one table from runs in parts)

Fuzzers, each from nothing (no seed corpus) with its trial number as the seed:
- `guided`: `epfuzz fuzz`'s default engine on the sim (epfuzz.search.engines.guided:
  the receiver-derived semantic features as feedback, the move registry, the schedule sampler
  as its main move, a share of fresh random inputs);
- `libfuzzer-cfl`: the harness file as .clusterfuzzlite/build.sh ships it
  (harnesses/<name>_fuzzer.py: the same features as libFuzzer counters, the same moves as its
  custom mutator, no line instrumentation), run with -runs=N and -max_total_time; its seconds
  include start-up, as a user of it waits for it;
- `random`: random bytes through the same decoder, in-process;
- `sampler`: a random configuration with a PCT-style schedule (epfuzz.search.sampler).

Sets: `deep` (epfuzz.protocols.deep: the slot-trailer defence the features were first written
against), `deep2` (epfuzz.protocols.deep2: other defences, kept as the set the feedback was not
designed for, issue 27), `zoo` (the shallow zoo), `all` (the three).

With `--execs N` a trial is bounded by N executions (the seconds budget stays as a backstop) and the
statistics are computed on executions too: median, Kaplan-Meier RMST with trials censored at N,
Mann-Whitney p and A12 against random; executions do not depend on the machine or its load, seconds
do. Every trial is a subprocess; in-process fuzzers start their clock after the imports. Each trial
is appended to OUT.trials.jsonl as it ends, so a run cut short keeps what it did and `--resume`
runs only what is missing. Writes OUT.json and OUT.md (figures, not assertions).
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

from epfuzz.cases.corpus import write_atomic  # noqa: E402

FUZZERS = ("guided", "libfuzzer-cfl", "random", "sampler")
IN_PROCESS = ("guided", "random", "sampler")
#: fuzzers of earlier result files (bench/search-deep*.json, search-zoo.json: the Greybox engine's
#: line-coverage harness): rendered where a file has them, no longer run
LEGACY = ("libfuzzer+feedback", "libfuzzer")
STAT = re.compile(r"stat::number_of_executed_units:\s+(\d+)")
#: issue 27's criterion for a deep bug, which looks at the random baseline only (never at the search being
#: judged): random bytes find it in fewer than half of their trials within DEEP_EXECS executions each
DEEP_EXECS = 10_000
DEEP_CRITERION = (f"deep = random finds it in fewer than half of its trials (fewer than 10 of 20) within "
                  f"{DEEP_EXECS:,} executions")


def in_process(kind: str, name: str, seed: int, budget: float, execs: int = 0) -> dict[str, Any]:
    """guided, random or sampler: executions until the first finding, within `execs` executions (0: no
    bound) and `budget` seconds."""
    from epfuzz.encoding import codec
    from epfuzz.protocols import REGISTRY, get_protocol
    from epfuzz.search.engines.guided import Guided
    from epfuzz.search.sampler import SamplerSearch
    from epfuzz.sim.engine import simulate

    proto = REGISTRY.load_plugin(name) if ":" in name else get_protocol(name)  # a plug-in: module:Attr
    rng = random.Random(seed)
    sampler = SamplerSearch(name, proto, seed) if kind == "sampler" else None
    loop = Guided(name, proto, seed) if kind == "guided" else None
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


def libfuzzer(kind: str, name: str, seed: int, budget: float, execs: int = 0) -> dict[str, Any]:
    """The harness as ClusterFuzzLite builds it, from an empty corpus: executions until its first crash."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        # a plug-in protocol (module:Attr) has no harness script: the plug-in harness runs it (issue 34.7)
        cmd = ([sys.executable, str(ROOT / "harnesses" / f"{name}_fuzzer.py")] if ":" not in name
               else [sys.executable, "-m", "epfuzz.continuous.plugin_fuzzer", f"--protocol={name}"])
        runs = [f"-runs={execs}"] if execs else []
        t0 = time.perf_counter()
        try:
            p = subprocess.run([*cmd, str(work), f"-artifact_prefix={tmp}/", f"-seed={seed}",
                                f"-max_total_time={int(budget)}", *runs, "-print_final_stats=1"],
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


def one_trial(kind: str, name: str, seed: int, budget: float, execs: int, log: Path) -> dict[str, Any]:
    if kind in IN_PROCESS:
        p = subprocess.run([sys.executable, __file__, "--one", kind, name, str(seed), str(budget), str(execs)],
                           capture_output=True, text=True, timeout=budget + 120)
        if p.returncode != 0:
            raise SystemExit(f"bench/search.py: {kind} on {name} (seed {seed}) failed: {p.stderr.strip()[-500:]}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
    else:
        r = libfuzzer(kind, name, seed, budget, execs)
    r.update(fuzzer=kind, bug=name, seed=seed, budget=budget, cap=execs)
    with log.open("a") as f:  # one line per trial, written whole: a run cut short keeps its trials
        f.write(json.dumps(r) + "\n")
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


def depth(trials: list[dict[str, Any]], cap: int) -> dict[str, str]:
    """Each bug's class by DEEP_CRITERION, from random's trials ("deep" or "shallow"; a bug with no
    random trial is not classed). Trials bounded below DEEP_EXECS cannot tell: an error, not a guess."""
    if cap and cap < DEEP_EXECS:
        raise ValueError(f"the deep criterion needs random trials of {DEEP_EXECS:,} executions; these stop at {cap:,}")
    out: dict[str, str] = {}
    for bug in sorted({t["bug"] for t in trials if t["fuzzer"] == "random"}):
        rs = [t for t in trials if t["bug"] == bug and t["fuzzer"] == "random"]
        if not cap and any(not t["found"] for t in rs):
            raise ValueError(f"{bug}: random trials bounded in seconds only cannot tell the deep criterion")
        hits = sum(t["found"] and t["execs"] <= DEEP_EXECS for t in rs)
        out[bug] = "deep" if 2 * hits < len(rs) else "shallow"
    return out


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
    ex = c.get("execs", 0)
    bound = f"at most {ex} executions and {c['budget']} s each" if ex else f"{c['budget']} s each"
    lines = [f"Search benchmark, {res['date']}, {res['machine']}: {c['trials']} trials per (bug, fuzzer), "
             f"{bound}, {c['jobs']} at a time." + (f" {c['note']}" if c.get("note") else ""), "",
             "Median executions and seconds to the bug (censored trials count as the budget: `>`), Kaplan-Meier "
             "RMST, Mann-Whitney U p and Vargha-Delaney A12 against random (A12 > 0.5: faster than random)"
             + (", in seconds and in executions." if ex else ", in seconds."), "",
             "| bug | fuzzer | found | median execs | median s | RMST s | p vs random | A12 vs random |"
             + (" RMST execs | p execs | A12 execs |" if ex else ""),
             "| --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- | --- | --- |" if ex else "")]
    try:
        klass = depth(res.get("trials", []), ex)
    except ValueError:
        klass = {}
    for bug, row in res["summary"].items():
        for kind in (*FUZZERS, *LEGACY):
            if kind not in row:
                continue
            r = row[kind]
            cens = ">" if r["found"] * 2 <= r["trials"] else ""
            p = "-" if r["p_vs_random"] is None else f"{r['p_vs_random']:.3g}"
            a = "-" if r["a12_vs_random"] is None else f"{r['a12_vs_random']:.2f}"
            row_ = (f"| `{bug}` | {kind} | {r['found']}/{r['trials']} | {cens}{r['median_execs']:.0f} | "
                    f"{cens}{r['median_seconds']} | {r['rmst_seconds']} | {p} | {a} |")
            if ex:
                pe = "-" if r.get("p_execs_vs_random") is None else f"{r['p_execs_vs_random']:.3g}"
                ae = "-" if r.get("a12_execs_vs_random") is None else f"{r['a12_execs_vs_random']:.2f}"
                row_ += f" {r['rmst_execs']} | {pe} | {ae} |"
            lines.append(row_)
    if klass:
        names = {k: ", ".join(f"`{b}`" for b in klass if klass[b] == k) or "none" for k in ("deep", "shallow")}
        lines += ["", f"By issue 27's criterion ({DEEP_CRITERION}), from these random trials: deep: "
                  f"{names['deep']}; shallow: {names['shallow']}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="bad protocols (default: the set's)")
    ap.add_argument("--budget", type=float, default=300, help="seconds per trial (a backstop with --execs)")
    ap.add_argument("--execs", type=int, default=0, help="executions per trial (0: seconds only)")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1,
                    help="seeds run from here (add trials to an earlier run, then --merge both)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--set", default="all", choices=("deep", "deep2", "zoo", "all"))
    ap.add_argument("--fuzzers", default=",".join(FUZZERS), help=f"comma-separated, of {', '.join(FUZZERS)}")
    ap.add_argument("--resume", action="store_true",
                    help="keep the trials already in OUT.trials.jsonl (same budgets) and run only the others")
    ap.add_argument("--out", default=str(ROOT / "bench" / "search"))
    ap.add_argument("--note", default="", help="a sentence for the table's header (where and how it ran)")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="no trials: summarize the trials of these result files together (one run split in parts)")
    a = ap.parse_args()
    if a.names:  # a misspelt name is one line now, not a failed trial after the old trials log was removed
        from epfuzz.infra.errors import EpfuzzError
        from epfuzz.protocols import get_protocol

        for n in a.names:
            try:
                get_protocol(n)
            except EpfuzzError as e:
                ap.error(str(e))
    names = a.names or bugs(a.set)
    kinds = a.fuzzers.split(",")
    if a.merge:
        parts = [json.loads(Path(f).read_text()) for f in a.merge]
        trials = [t for part in parts for t in part["trials"]]
        keys = [(t["bug"], t["fuzzer"], t["seed"]) for t in trials]
        if len(set(keys)) < len(keys):
            raise SystemExit("--merge: the same (bug, fuzzer, seed) trial is in two parts: run the second part "
                             "with --first-seed past the first")
        if len({(part["config"]["budget"], part["config"].get("execs", 0)) for part in parts}) > 1:
            raise SystemExit("--merge: the parts ran at different budgets; a table has one budget")
        a.budget, a.execs = parts[0]["config"]["budget"], parts[0]["config"].get("execs", 0)
        kinds = sorted({t["fuzzer"] for t in trials}, key=FUZZERS.index)
        machine, a.jobs = parts[0]["machine"], parts[0]["config"]["jobs"]
        a.trials = max(sum(1 for t in trials if (t["bug"], t["fuzzer"]) == key)
                       for key in {(t["bug"], t["fuzzer"]) for t in trials})
    else:
        unknown = [k for k in kinds if k not in FUZZERS]
        if unknown:
            raise SystemExit(f"bench/search.py: unknown fuzzer {unknown[0]!r}; known: {', '.join(FUZZERS)}")
        log = Path(a.out + ".trials.jsonl")
        done = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if a.resume and \
            log.exists() else []
        if not a.resume:
            log.unlink(missing_ok=True)
        other = [t for t in done if (t.get("budget", a.budget), t.get("cap", a.execs)) != (a.budget, a.execs)]
        if other:
            raise SystemExit(f"bench/search.py --resume: {log} holds trials at another budget "
                             f"({other[0].get('budget')} s, {other[0].get('cap')} executions): one table has "
                             "one budget")
        have = {(t["fuzzer"], t["bug"], t["seed"]) for t in done}
        # the slowest first (random, censored on the deep bugs), so that the pool's last minutes are not one long trial
        order = sorted(kinds, key=lambda k: k != "random")
        jobs = [(k, n, s) for k in order for s in range(a.first_seed, a.first_seed + a.trials) for n in names
                if (k, n, s) not in have]
        with ThreadPoolExecutor(a.jobs) as pool:
            trials = done + list(pool.map(lambda j: one_trial(*j, a.budget, a.execs, log), jobs))
        machine = f"{platform.machine()} python {platform.python_version()}, {os.cpu_count()} cores"
    res = {"date": time.strftime("%Y-%m-%d"), "machine": machine,
           "config": {"budget": a.budget, "execs": a.execs, "trials": a.trials, "jobs": a.jobs,
                      "fuzzers": kinds, "note": a.note},
           "summary": summarize(trials, a.budget, a.execs), "trials": trials}
    for path, text in ((Path(a.out + ".json"), json.dumps(res, indent=1) + "\n"), (Path(a.out + ".md"), render(res))):
        write_atomic(path, text.encode())  # written whole, then renamed: a cut run leaves the old file
    print(render(res))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        kind, name, seed, budget, execs = sys.argv[2:7]
        print(json.dumps(in_process(kind, name, int(seed), float(budget), int(execs))))
        raise SystemExit(0)
    raise SystemExit(main())
