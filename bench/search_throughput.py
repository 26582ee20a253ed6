#!/usr/bin/env python3
"""The guided engine's throughput as a user runs it (issue 27): `--jobs` scaling and a long run's decay.

    python bench/search_throughput.py jobs  [--protocol P] [--seconds S] [--cpus 0,1]
    python bench/search_throughput.py decay [--protocol P] [--seconds S] [--cpus 0,1]
    python bench/search_throughput.py render            # the markdown of bench/search_throughput.json

`jobs`: `epfuzz fuzz P --time S --jobs 1` then `--jobs 2`, each pinned to the same CPUs (`--cpus`,
taskset: "a 2-core machine" on a bigger one), executions per second over the run and the bugs found.
`decay`: one `epfuzz fuzz P --time S` run; from its progress.csv, exec/s of the first minute against
the last minute, and RSS of the second minute against the last (the per-execution cost must not grow
with the corpus; RSS must stay flat). A fixed protocol is the default, so no finding ends a job early
and every second is search. Each measurement is appended to bench/search_throughput.json with its
date, machine and command (figures, not assertions; speed targets belong here, not in tests).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "search_throughput.json"


def _fuzz(protocol: str, seconds: int, jobs: int, cpus: str, run: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "epfuzz", "fuzz", protocol, "--time", str(seconds), "--jobs", str(jobs),
           "--seed", "1", "--run-dir", str(run)]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       timeout=seconds + 600)
    if p.returncode not in (0, 1):
        raise SystemExit(f"search_throughput: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
    stats = json.loads((run / "stats.json").read_text())
    rows = list(csv.DictReader((run / "progress.csv").open()))
    bugs = sorted({b["root_cause"] for b in csv.DictReader((run / "bugs.csv").open())}) \
        if (run / "bugs.csv").exists() else []
    return {"execs": stats["execs"], "wall": round(time.monotonic() - t0, 1), "rows": rows, "bugs": bugs,
            "command": " ".join(cmd[cmd.index("-m") - 1:]).replace(sys.executable, "python")}


def jobs(a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": a.protocol, "seconds": a.seconds, "cpus": a.cpus}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, 2):
            r = _fuzz(a.protocol, a.seconds, n, a.cpus, Path(tmp) / f"j{n}")
            last = r["rows"][-1]
            out[f"jobs{n}"] = {"execs": r["execs"], "seconds": float(last["seconds"]),
                               "exec_per_s": round(r["execs"] / float(last["seconds"]), 1), "bugs": r["bugs"]}
    out["speedup"] = round(out["jobs2"]["exec_per_s"] / out["jobs1"]["exec_per_s"], 2)
    return out


def _rate(rows: list[dict[str, str]], t0: float, t1: float) -> float:
    """exec/s between the last rows at or before t0 and t1 (progress.csv is cumulative; before the
    first row, the start: nothing executed)."""
    def at(t: float) -> dict[str, str]:
        before = [r for r in rows if float(r["seconds"]) <= t]
        return before[-1] if before else {"seconds": "0", "execs": "0"}
    a, b = at(t0), at(t1)
    return (int(b["execs"]) - int(a["execs"])) / max(1e-9, float(b["seconds"]) - float(a["seconds"]))


def decay(a: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        r = _fuzz(a.protocol, a.seconds, 1, a.cpus, Path(tmp) / "d")
    rows = [x for x in r["rows"][:-1] if x["seconds"]]   # the last row repeats the summary's numbers
    end = float(rows[-1]["seconds"])
    first, last = _rate(rows, 0, 60), _rate(rows, end - 60, end)
    rss = [(float(x["seconds"]), int(x["rss_mb"])) for x in rows]
    rss2 = max(m for t, m in rss if 60 <= t <= 120)
    return {"protocol": a.protocol, "seconds": a.seconds, "cpus": a.cpus, "execs": r["execs"],
            "corpus": int(rows[-1]["corpus"]), "first_minute_exec_per_s": round(first, 1),
            "last_minute_exec_per_s": round(last, 1), "kept": round(last / first, 3),
            "rss_mb_second_minute": rss2, "rss_mb_last": rss[-1][1], "rss_growth": round(rss[-1][1] / rss2 - 1, 3)}


def render(results: list[dict[str, Any]]) -> str:
    lines = ["| date | machine | measurement | figures |", "| --- | --- | --- | --- |"]
    for r in results:
        if r["kind"] == "jobs":
            fig = (f"{r['protocol']}, {r['seconds']} s: 1 job {r['jobs1']['exec_per_s']} exec/s, 2 jobs "
                   f"{r['jobs2']['exec_per_s']} exec/s ({r['speedup']}x); root causes found: "
                   f"{len(r['jobs1']['bugs'])} / {len(r['jobs2']['bugs'])}; "
                   f"target >= 1.6x: {'met' if r['speedup'] >= 1.6 else 'missed'}")
        else:
            fig = (f"{r['protocol']}, {r['seconds']} s, corpus {r['corpus']}: first minute "
                   f"{r['first_minute_exec_per_s']} exec/s, last minute {r['last_minute_exec_per_s']} "
                   f"({r['kept']:.0%} kept); RSS {r['rss_mb_second_minute']} -> {r['rss_mb_last']} MB "
                   f"({r['rss_growth']:+.0%}); targets (over 30 min) >= 80% kept: "
                   f"{'met' if r['kept'] >= 0.8 else 'missed'}, "
                   f"RSS within 10%: {'met' if abs(r['rss_growth']) <= 0.1 else 'missed'}")
        lines.append(f"| {r['date']} | {r['machine']} | `{r['command']}` | {fig} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("jobs", "decay", "render"))
    ap.add_argument("--protocol", default="deep_other_qp_fixed")
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--cpus", default="", help="taskset CPU list, e.g. 0,1 (a 2-core machine on a bigger one)")
    ap.add_argument("--machine", default="", help="how to name the machine in the table")
    a = ap.parse_args()
    results = json.loads(OUT.read_text()) if OUT.exists() else []
    if a.what == "render":
        print(render(results))
        return 0
    a.seconds = a.seconds or (60 if a.what == "jobs" else 1800)
    r = jobs(a) if a.what == "jobs" else decay(a)
    cpus = f", pinned to CPUs {a.cpus}" if a.cpus else ""
    r.update(kind=a.what, date=time.strftime("%Y-%m-%d"),
             machine=(a.machine or f"{platform.machine()} python {platform.python_version()}, "
                      f"{os.cpu_count()} cores") + cpus,
             command=f"python bench/search_throughput.py {a.what} --protocol {a.protocol} --seconds {a.seconds}"
             + (f" --cpus {a.cpus}" if a.cpus else ""))
    results.append(r)
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(OUT)
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
