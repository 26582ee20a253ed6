"""`epfuzz fuzz --jobs N` on the guided engine: N worker processes (epfuzz.campaign.worker, each
campaign_guided.run_worker) fuzz into one run folder, sharing corpus/ the way libFuzzer's -jobs and
AFL++'s -M/-S do; this process follows their progress rows, forwards a stop, then groups every job's
findings into one summary and bug table (the same as one job's). A job still running KILL_GRACE_S after
the forwarded SIGTERM is killed, as `epfuzz.campaign.jobs` kills a libFuzzer job: a worker checks for a
stop between executions, and one plug-in call may run up to its per-call limit (or the plug-in may have
replaced the worker's handler), longer than a container's grace before its own SIGKILL; what a killed job
wrote is whole (findings and corpus entries are written atomically), its stats are missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epfuzz.campaign.common import (
    PROGRESS_HEADER,
    Summary,
    exec_bound,
    false_alarms,
    log_end,
    log_start,
    read_findings,
    resource_findings,
    until_grace,
)
from epfuzz.campaign.jobs import KILL_GRACE_S
from epfuzz.cases.corpus import write_atomic
from epfuzz.infra import proc
from epfuzz.infra.diskspace import NoSpace, is_no_room, remove_empty
from epfuzz.infra.log import get_logger
from epfuzz.search.monitor import Console


def _last_row(path: Path) -> list[str]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    return lines[-1].split(",") if len(lines) > 1 else []


class _Logs:
    """The jobs' logs read as they grow: their raw findings and false alarms go to this run's console."""

    def __init__(self, run_dir: Path, jobs: int, console: Console) -> None:
        self.paths = [run_dir / f"job{j}.log" for j in range(jobs)]
        self.at = [0] * jobs
        self.console = console

    def follow(self) -> None:
        for j, path in enumerate(self.paths):
            try:
                with path.open("rb") as f:
                    f.seek(self.at[j])
                    chunk = f.read()
            except OSError:
                continue
            whole = chunk[:chunk.rfind(b"\n") + 1]   # a line still being written waits for its end
            self.at[j] += len(whole)
            for line in whole.decode(errors="replace").splitlines():
                self.console.relay(line)


def _watch(procs: list[subprocess.Popen[bytes]], run_dir: Path, start: float, stopped: list[int], seconds: float,
           progress: bool, log: Any = None) -> str:
    """Follow the jobs until all have exited, forwarding a stop, summing their progress rows into the
    run's progress.csv and showing them as one run (the progress line, each raw finding); returns why the
    disk is full, or ""."""
    forwarded_at = 0.0
    console = Console(log=log)  # its events carry the campaign's fields, as the campaign's own do
    logs = _Logs(run_dir, len(procs), console)
    try:
        with (run_dir / "progress.csv").open("a") as csv:
            csv.write(PROGRESS_HEADER)
            while any(p.poll() is None for p in procs):
                if stopped[0] and not forwarded_at:
                    _stop_all(procs)
                    forwarded_at = time.monotonic()
                elif forwarded_at and time.monotonic() - forwarded_at >= KILL_GRACE_S:
                    _kill_all(procs)  # a job whose plug-in replaced its SIGTERM handler, or a call that runs on
                time.sleep(0.2)
                logs.follow()
                rows = [_last_row(run_dir / "jobs" / f"job-{j}.csv") for j in range(len(procs))]
                rows = [r for r in rows if len(r) >= 7]
                if rows:
                    el = time.monotonic() - start
                    n, features = sum(int(r[1]) for r in rows), max(int(r[3]) for r in rows)
                    corpus = len(os.listdir(run_dir / "corpus"))
                    found = len(list(run_dir.glob("finding-*.json")))
                    csv.write(f"{el:.1f},{n},{n / el if el else 0:.0f},{features},{corpus},{found},"
                              f"{sum(int(r[6]) for r in rows)}\n")
                    csv.flush()
                    if progress:
                        console.progress(el, seconds, n, features, corpus, found)
            logs.follow()
    except OSError as e:
        if not is_no_room(e):
            raise
        _stop_all(procs)
        for p in procs:
            p.wait()
        return str(NoSpace(run_dir / "progress.csv", e))
    finally:
        console.end()
    return ""


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)


def _kill_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()


def fuzz_jobs(name: str, protocol: str, preset: str, run_dir: Path, seconds: float, seed: int, progress: bool,
               max_execs: int | None, jobs: int, feedback: Sequence[str], moves: Sequence[str]) -> Summary:
    (run_dir / "jobs").mkdir(exist_ok=True)
    log = get_logger(harness=name, backend="sim", preset=preset, engine="guided", jobs=jobs)
    args = {"run_dir": str(run_dir), "name": name, "protocol": protocol, "preset": preset, "seed": seed,
            "seconds": seconds, "max_execs": max_execs, "feedback": list(feedback), "moves": list(moves)}
    stopped = [0]

    def stop(signum: int, *_: object) -> None:
        stopped[0] = signum

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    log_start(log, "sim", seconds=seconds, run_dir=str(run_dir), jobs=jobs)
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-m", "epfuzz.campaign.worker", json.dumps({**args, "job": j})],
                              cwd=os.getcwd(), stdout=(run_dir / f"job{j}.log").open("w"), stderr=subprocess.STDOUT,
                              start_new_session=True, preexec_fn=proc.die_with_parent) for j in range(jobs)]
    disk_full = _watch(procs, run_dir, start, stopped, seconds, progress, log)
    elapsed = time.monotonic() - start
    stats = []
    for j in range(jobs):
        try:
            stats.append(json.loads((run_dir / "jobs" / f"job-{j}.json").read_text()))
        except (OSError, ValueError):
            stats.append({})
    disk_full = disk_full or next((s["disk_full"] for s in stats if s.get("disk_full")), "")
    errors = [j for j, p in enumerate(procs) if p.returncode not in (0, 2) and not stopped[0]]
    try:
        findings, grouping = read_findings(run_dir, "sim", log, stop=(lambda: True) if disk_full else until_grace(
            lambda: stopped[0] != 0), progress=progress)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    resource = [tuple(r) for s in stats for r in s.get("resource", [])]
    total = _merge_stats(stats)
    summary = Summary(name, run_dir, elapsed, total["execs"], max((s.get("features", 0) for s in stats), default=0),
                      len(os.listdir(run_dir / "corpus")), len(errors), findings, grouping.bugs, stopped[0],
                      resource=resource_findings(resource, protocol, preset),
                      false_alarms=false_alarms([p for _, p, _ in findings]), left=grouping.left, why=grouping.why,
                      bound=exec_bound(max_execs, [int(s.get("execs", 0)) for s in stats]))
    crashed = [s["error"] for s in stats if s.get("error")]  # a job that stopped at the plug-in's exception
    summary.harness_errors += len(crashed)
    if crashed:
        summary.error = crashed[0]
    elif errors:
        summary.error = f"job {errors[0]} exited {procs[errors[0]].returncode} (see {run_dir}/job{errors[0]}.log)"
    try:
        write_atomic(run_dir / "stats.json", json.dumps({**total, "jobs": stats}, indent=1).encode())
        with (run_dir / "progress.csv").open("a") as f:
            f.write(f"{elapsed:.1f},{total['execs']},{total['execs'] / elapsed if elapsed else 0:.0f},"
                    f"{summary.cov},{summary.corpus},{len(findings)},0\n")
    except (OSError, NoSpace) as e:
        if not is_no_room(e):
            raise
        disk_full = disk_full or str(e if isinstance(e, NoSpace) else NoSpace(run_dir / "progress.csv", e))
    if disk_full:
        remove_empty(run_dir)
        summary.disk_full = disk_full
    log_end(log, summary, jobs=jobs)
    return summary


def _merge_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """The jobs' stats summed: executions, and per move and per feedback what they did."""
    out: dict[str, Any] = {"execs": 0, "moves": {}, "feedbacks": {}}
    for s in stats:
        out["execs"] += s.get("execs", 0)
        for k, m in s.get("moves", {}).items():
            t = out["moves"].setdefault(k, {"used": 0, "kept": 0, "found": 0})
            for f in t:
                t[f] += m.get(f, 0)
        for k, n in s.get("feedbacks", {}).items():
            out["feedbacks"][k] = out["feedbacks"].get(k, 0) + n
    return out
