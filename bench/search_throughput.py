#!/usr/bin/env python3
"""The guided engine's throughput as a user runs it (issue 27): `--jobs` scaling and a long run's decay.

    python bench/search_throughput.py jobs  [--protocol P] [--seconds S] [--cpus 0,1]
    python bench/search_throughput.py decay [--protocol P] [--seconds S] [--cpus 0,1]
    python bench/search_throughput.py decay ... --calibrate --out F   # beside it, a fixed probe workload
    python bench/search_throughput.py render            # the markdown of bench/search_throughput.json

`jobs`: `epfuzz fuzz P --time S --jobs 1` then `--jobs 2`, each pinned to the same CPUs (`--cpus`,
taskset: "a 2-core machine" on a bigger one), executions per second over the run and the bugs found.
`decay`: one `epfuzz fuzz P --time S` run; from its progress.csv, exec/s of the first minute against
the last minute, and RSS of the second minute against the last (the per-execution cost must not grow
with the corpus; RSS must stay flat). Beside the wall-clock rates, executions per CPU second of the
fuzzing process (its /proc CPU time when each progress row appeared), per minute of the run: on a
shared machine the wall clock also measures the other processes' load, the CPU time far less (what
others do to the caches and the memory bus still shows in it: hence `--calibrate`).
`--calibrate` runs a fixed probe workload beside it on the same CPUs every half minute and also
reports the CPU figures divided by the probe's (see `probe`). `--out F` appends to F instead
(written atomically), e.g. for a run whose record is committed later.
A fixed protocol is the default, so no finding ends a job early and every second is search. Each
measurement is appended to bench/search_throughput.json with its date, machine, emulator and command
(figures, not assertions; speed targets belong here, not in tests).
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
POLL = 0.05     # seconds between two looks at a running job's progress.csv and CPU time


PROBE_EVERY = 30.0  # seconds between two runs of the probe's fixed workload beside a decay run
PROBE_STEPS = 200   # guided executions of the probe's workload (a fixed seed: the same work every time)


def probe(protocol: str) -> None:
    """`probe`: beside a decay run, on the same CPUs, the same fixed workload every PROBE_EVERY seconds
    (a new guided engine, seed 7, PROBE_STEPS executions, the form cache emptied first), printing the
    CPU seconds it took. The work never changes, so what changes in its CPU time is the machine (other
    processes' pressure on caches and memory, a shared host's clock): the decay run's per-minute CPU
    figures are divided by it too, so a slower machine is not read as a slower search."""
    from epfuzz.protocols import get_protocol
    from epfuzz.search.engines.guided import Guided
    from epfuzz.sim.engine import FORMS

    proto = get_protocol(protocol)

    def once() -> float:
        FORMS.clear()
        g = Guided(protocol, proto, 7)
        t = time.process_time()
        for _ in range(PROBE_STEPS):
            g.step()
        return time.process_time() - t

    once()  # the first one warms the imports and the interpreter's caches
    while True:
        t0 = time.monotonic()
        print(json.dumps({"t": t0, "cpu_s": once()}), flush=True)
        time.sleep(max(0.0, PROBE_EVERY - (time.monotonic() - t0)))


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (/proc/PID/stat fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fuzz(protocol: str, seconds: int, jobs: int, cpus: str, run: Path, calibrate: bool = False) -> dict[str, Any]:
    """One `epfuzz fuzz` run. Beside its progress.csv (wall-clock seconds of the run), the CPU seconds
    the fuzzing process had used when each row appeared (read from /proc within POLL seconds of the
    row's write; one job only: --jobs N's workers are other processes): on a shared, loaded machine the
    wall clock measures the load as much as the search, the process's CPU time only the search."""
    cmd = [sys.executable, "-m", "epfuzz", "fuzz", protocol, "--time", str(seconds), "--jobs", str(jobs),
           "--seed", "1", "--run-dir", str(run)]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]     # taskset execs the command: the pid stays the fuzzer's
    t0 = time.monotonic()
    cpu: list[tuple[float, float]] = []         # (CPU seconds, monotonic time) at each progress row, in row order
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.TemporaryFile("w+") as probed:
        pr = None
        if calibrate:
            pcmd = [sys.executable, str(Path(__file__).resolve()), "probe", "--protocol", protocol]
            pr = subprocess.Popen(["taskset", "-c", cpus, *pcmd] if cpus else pcmd, stdout=probed,
                                  stderr=subprocess.DEVNULL, env=env)
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        csv_path, seen, partial = run / "progress.csv", 0, ""
        while p.poll() is None:
            if time.monotonic() - t0 > seconds + 600:
                p.kill()
            if csv_path.exists():
                with csv_path.open() as f:
                    f.seek(seen)
                    chunk = f.read()
                seen += len(chunk.encode())
                lines = (partial + chunk).split("\n")
                partial = lines.pop()
                now = (_cpu_s(p.pid), time.monotonic())
                cpu += [now for x in lines if x and not x.startswith("seconds")]
            time.sleep(POLL)
        if pr is not None:
            pr.terminate()
            pr.wait()
        err.seek(0)
        stderr = err.read()
        probed.seek(0)
        probes = [json.loads(x) for x in probed.read().splitlines() if x.startswith("{")]
    if p.returncode not in (0, 1):
        raise SystemExit(f"search_throughput: {' '.join(cmd)} exited {p.returncode}: {stderr.strip()[-400:]}")
    stats = json.loads((run / "stats.json").read_text())
    rows = list(csv.DictReader((run / "progress.csv").open()))
    for r, (c, mono) in zip(rows, cpu):
        r["cpu_s"], r["mono"] = str(c), str(mono)
    bugs = sorted({b["root_cause"] for b in csv.DictReader((run / "bugs.csv").open())}) \
        if (run / "bugs.csv").exists() else []
    return {"execs": stats["execs"], "wall": round(time.monotonic() - t0, 1), "rows": rows, "bugs": bugs,
            "probes": probes,
            "command": " ".join(cmd[cmd.index("-m") - 1:]).replace(sys.executable, "python")}


def _emulator() -> str:
    """Which emulator `epfuzz fuzz` runs here (compiled or pure Python, and why): the figures depend on it."""
    p = subprocess.run([sys.executable, "-c", "from epfuzz.core import native; print(native.describe())"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return p.stdout.strip() or p.stderr.strip()[-200:]


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


def _at(rows: list[dict[str, str]], t: float) -> dict[str, str]:
    """The last row at or before `t` seconds (before the first row, the start: nothing executed)."""
    before = [r for r in rows if float(r["seconds"]) <= t]
    return before[-1] if before else {"seconds": "0", "execs": "0", "cpu_s": "0"}


def _rate(rows: list[dict[str, str]], t0: float, t1: float) -> float:
    """exec/s of wall-clock time between the last rows at or before t0 and t1 (progress.csv is cumulative)."""
    a, b = _at(rows, t0), _at(rows, t1)
    return (int(b["execs"]) - int(a["execs"])) / max(1e-9, float(b["seconds"]) - float(a["seconds"]))


def _cpu_rate(rows: list[dict[str, str]], t0: float, t1: float) -> float:
    """Executions per CPU second of the fuzzing process over the same rows as `_rate` (t0 at or after the
    first row: before it the process's CPU time holds its imports, which are no executions)."""
    a, b = _at(rows, t0), _at(rows, t1)
    return (int(b["execs"]) - int(a["execs"])) / max(1e-9, float(b["cpu_s"]) - float(a["cpu_s"]))


def _probe_in(probes: list[dict[str, float]], t0: float, t1: float) -> float | None:
    """The probe's mean CPU seconds over its runs that began between monotonic times t0 and t1."""
    got = [p["cpu_s"] for p in probes if t0 <= p["t"] < t1]
    return sum(got) / len(got) if got else None


def decay(a: argparse.Namespace) -> dict[str, Any]:
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        r = _fuzz(a.protocol, a.seconds, 1, a.cpus, Path(tmp) / "d", calibrate=a.calibrate)
    rows = [x for x in r["rows"][:-1] if x["seconds"] and "cpu_s" in x]  # the last row repeats the summary's
    # minutes counted from the first row (a second into the loop: the CPU time before it is start-up)
    start, end = float(rows[0]["seconds"]), float(rows[-1]["seconds"])
    first, last = _rate(rows, start, start + 60), _rate(rows, end - 60, end)
    cfirst, clast = _cpu_rate(rows, start, start + 60), _cpu_rate(rows, end - 60, end)
    probes = r["probes"]

    def probe_at(t0: float, t1: float) -> float | None:
        return _probe_in(probes, float(_at(rows, t0).get("mono", "nan")), float(_at(rows, t1).get("mono", "nan")))

    minutes = []
    for m in range(int((end - start) // 60)):
        t0, t1 = start + 60 * m, start + 60 * (m + 1)
        a0, a1 = _at(rows, t0), _at(rows, t1)
        wall = float(a1["seconds"]) - float(a0["seconds"])
        row = {"minute": m + 1, "corpus": int(a1.get("corpus", 0)),
               "exec_per_s_wall": round(_rate(rows, t0, t1), 1),
               "exec_per_cpu_s": round(_cpu_rate(rows, t0, t1), 1),
               "cpu_share": round((float(a1["cpu_s"]) - float(a0["cpu_s"])) / max(1e-9, wall), 3)}
        if probes:
            pm = probe_at(t0, t1)
            row["probe_cpu_s"] = None if pm is None else round(pm, 3)
        minutes.append(row)
    rss = [(float(x["seconds"]), int(x["rss_mb"])) for x in rows]
    rss2 = max(m for t, m in rss if 60 <= t <= 120)
    out = {"protocol": a.protocol, "seconds": a.seconds, "cpus": a.cpus, "execs": r["execs"],
           "corpus": int(rows[-1]["corpus"]), "first_minute_exec_per_s": round(first, 1),
           "last_minute_exec_per_s": round(last, 1), "kept": round(last / first, 3),
           "first_minute_exec_per_cpu_s": round(cfirst, 1), "last_minute_exec_per_cpu_s": round(clast, 1),
           "kept_cpu": round(clast / cfirst, 3), "cpu_s": round(float(rows[-1]["cpu_s"]), 1),
           "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
           "minutes": minutes,
           "rss_mb_second_minute": rss2, "rss_mb_last": rss[-1][1], "rss_growth": round(rss[-1][1] / rss2 - 1, 3)}
    # the probe's runs of the first and of the last three minutes (a run is a third of a second of CPU: one
    # or two a minute are noisy); where the run is too short for that, its first and last minutes
    span = 180 if end - start >= 360 else 60
    p_first, p_last = probe_at(start, start + span), probe_at(end - span, end)
    if p_first and p_last:
        # the probe's work is fixed: where it took x times its first minutes' CPU the machine ran x times
        # slower, so the fuzzer's executions per CPU second there are scaled by x
        out.update(probe_cpu_s_first=round(p_first, 3), probe_cpu_s_last=round(p_last, 3),
                   kept_cpu_calibrated=round(clast * p_last / (cfirst * p_first), 3))
    return out


def render(results: list[dict[str, Any]]) -> str:
    lines = ["| date | machine | measurement | figures |", "| --- | --- | --- | --- |"]
    for r in results:
        if r["kind"] == "jobs":
            fig = (f"{r['protocol']}, {r['seconds']} s: 1 job {r['jobs1']['exec_per_s']} exec/s, 2 jobs "
                   f"{r['jobs2']['exec_per_s']} exec/s ({r['speedup']}x); root causes found: "
                   f"{len(r['jobs1']['bugs'])} / {len(r['jobs2']['bugs'])}; "
                   f"target >= 1.6x: {'met' if r['speedup'] >= 1.6 else 'missed'}")
        else:
            cpu, cpu_target = "", ""
            if "kept_cpu" in r:
                cpu = (f"per CPU second of the fuzzing process: first minute {r['first_minute_exec_per_cpu_s']}, "
                       f"last minute {r['last_minute_exec_per_cpu_s']} ({r['kept_cpu']:.0%} kept); ")
                cpu_target = f"per CPU second {'met' if r['kept_cpu'] >= 0.8 else 'missed'}, "
            if "kept_cpu_calibrated" in r:
                cpu += (f"the same divided by the machine's speed (a fixed probe workload beside it took "
                        f"{r['probe_cpu_s_first']} s of CPU at the start, {r['probe_cpu_s_last']} s at "
                        f"the end): {r['kept_cpu_calibrated']:.0%} kept; ")
            fig = (f"{r['protocol']}, {r['seconds']} s, corpus {r['corpus']}: executions {cpu}per wall-clock "
                   f"second: first minute {r['first_minute_exec_per_s']}, last minute {r['last_minute_exec_per_s']} "
                   f"({r['kept']:.0%} kept); RSS {r['rss_mb_second_minute']} -> {r['rss_mb_last']} MB "
                   f"({r['rss_growth']:+.0%}); targets (over 30 min): >= 80% kept {cpu_target}per wall-clock "
                   f"second {'met' if r['kept'] >= 0.8 else 'missed'}; "
                   f"RSS within 10%: {'met' if abs(r['rss_growth']) <= 0.1 else 'missed'}")
            if "loadavg_start" in r:   # what the wall-clock figures also measured
                fig += (f"; machine load average {r['loadavg_start'][0]} at the start, {r['loadavg_end'][0]} "
                        "at the end")
        lines.append(f"| {r['date']} | {r['machine']} | `{r['command']}` | {fig} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("jobs", "decay", "render", "probe"))
    ap.add_argument("--protocol", default="deep_other_qp_fixed")
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--cpus", default="", help="taskset CPU list, e.g. 0,1 (a 2-core machine on a bigger one)")
    ap.add_argument("--machine", default="", help="how to name the machine in the table")
    ap.add_argument("--out", type=Path, default=OUT,
                    help=f"the results file the measurement is appended to (written atomically; default {OUT})")
    ap.add_argument("--calibrate", action="store_true",
                    help="decay: run the fixed probe workload beside it on the same CPUs (see `probe`)")
    a = ap.parse_args()
    if a.what == "probe":
        probe(a.protocol)
        return 0
    out = a.out
    results = json.loads(out.read_text()) if out.exists() else []
    if a.what == "render":
        print(render(results))
        return 0
    a.seconds = a.seconds or (60 if a.what == "jobs" else 1800)
    r = jobs(a) if a.what == "jobs" else decay(a)
    cpus = f", pinned to CPUs {a.cpus}" if a.cpus else ""
    r.update(kind=a.what, date=time.strftime("%Y-%m-%d"), emulator=_emulator(), nice=os.nice(0),
             machine=(a.machine or f"{platform.machine()} python {platform.python_version()}, "
                      f"{os.cpu_count()} cores") + cpus,
             command=f"python bench/search_throughput.py {a.what} --protocol {a.protocol} --seconds {a.seconds}"
             + (f" --cpus {a.cpus}" if a.cpus else "") + (" --calibrate" if a.calibrate else ""))
    results = json.loads(out.read_text()) if out.exists() else []   # as it is now: another run may have added one
    results.append(r)
    from epfuzz.cases.corpus import write_atomic

    write_atomic(out, (json.dumps(results, indent=1) + "\n").encode())
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
