"""`epfuzz fuzz`: run a harness under libFuzzer for a bounded time, show progress, summarise.

Each job is the harness script in its own process in --keep-going mode, writing
into a fresh run folder (`runs/<harness>-<time>/`): libFuzzer's working corpus
(seeded from the harness's shipped corpus, `epfuzz.continuous.targets.seed_folder`, which is
never written), crash artifacts, and one case file per bug signature. If a job dies (a harness error), it is
restarted for the time left and the error is counted. SIGINT/SIGTERM stop the
jobs; libFuzzer prints its final stats, and the summary still prints.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import TextIO

from epfuzz.backends import get_backend
from epfuzz.backends.base import Where
from epfuzz.campaign.common import (
    PROGRESS_HEADER,
    RUNS,
    Summary,
    exec_bound,
    false_alarms,
    log_end,
    log_start,
    plugin_name,
    read_findings,
    resource_findings,
    until_grace,
)
from epfuzz.campaign.guest import fuzz_in_guest
from epfuzz.campaign.jobs import _Jobs, _no_room
from epfuzz.campaign.preflight import preflight
from epfuzz.campaign.rundir import fresh_run_dir
from epfuzz.cases.corpus import LIBFUZZER_SHA1, case_paths, sha1, write_atomic
from epfuzz.continuous.targets import (
    entry_command,
    harness_command,
    harness_name,
    harness_protocol,
    home_preset,
    seed_folder,
)
from epfuzz.infra.diskspace import NoSpace, remove_empty
from epfuzz.infra.errors import InputError
from epfuzz.infra.log import get_logger
from epfuzz.protocols import limits


def _monitor(jobs: _Jobs, seconds: int, progress: bool) -> None:
    """Until every job has ended: a progress.csv row a second, a progress note (a line on a terminal).
    A full disk ends the campaign (its summary still prints)."""
    try:
        with (jobs.run_dir / "progress.csv").open("a") as csv:
            _rows(jobs, seconds, progress, csv)
    except OSError as e:
        jobs.disk_full = jobs.disk_full or _no_room(jobs.run_dir / "progress.csv", e)
        jobs.stop_jobs()
        while jobs.reap():
            jobs.enforce(time.monotonic())
            time.sleep(0.5)


def _rows(jobs: _Jobs, seconds: int, progress: bool, csv: TextIO) -> None:
    last_row = 0.0
    run_dir = jobs.run_dir
    if csv.tell() == 0:
        csv.write(PROGRESS_HEADER)
    while jobs.reap():
        now = time.monotonic()
        jobs.enforce(now)
        el = now - jobs.start
        execs = jobs.execs
        n_find = len(list(run_dir.glob("finding-*.json")))
        if now - last_row >= 1:  # the time series `epfuzz report` plots
            csv.write(f"{el:.1f},{execs},{execs / el if el else 0:.0f},{jobs.cov},{jobs.corp},{n_find},"
                      f"{jobs.rss}\n")
            csv.flush()
            last_row = now
        if progress:
            jobs.console.progress(el, seconds, execs, jobs.cov, jobs.corp, n_find)
        time.sleep(0.5)


def _summarize(name: str, jobs: _Jobs, work: Path, backend: str, log: object) -> Summary:
    """Read the run folder back: raw findings, bugs by root cause, the summary and its log lines."""
    run_dir = jobs.run_dir
    for t in jobs.readers:  # libFuzzer's final stats land in the job logs before the summary is read
        if t:
            t.join(timeout=5)
    if not any(jobs.procs):  # libFuzzer's SIGINT handler _Exit()s a job mid-write: its temp file is garbage
        for tmp in run_dir.glob(".finding-*"):
            tmp.unlink(missing_ok=True)
    # a signal (the one that ended the fuzzing too) leaves the grouping SIGNAL_GRACE seconds; with the
    # disk full there is no room for minimized cases: only what the cache knows is grouped
    stop = (lambda: True) if jobs.disk_full else until_grace(lambda: bool(jobs.got))
    findings, grouping = read_findings(run_dir, backend, log, stop=stop)
    if grouping.why.startswith("no room") and not jobs.disk_full:
        jobs.disk_full = grouping.why
    bugs = grouping.bugs
    corpus_files = []
    for p in case_paths([work]):
        if sha1(p.read_bytes()) == p.name:
            corpus_files.append(p)
        elif jobs.disk_full and LIBFUZZER_SHA1.fullmatch(p.name):  # half-written when the disk filled
            p.unlink(missing_ok=True)
    # the corpus fuzzed: libFuzzer's own count (`corp:`, as the progress line says) takes in the folders named
    # after `--`, which a resumed run's inputs come from and libFuzzer never copies into corpus/ (it said
    # corpus 0 of a run on 261 old inputs: ops trial 1205 item 9); corpus/ is the more where jobs share it
    summary = Summary(name, run_dir, time.monotonic() - jobs.start, jobs.execs, jobs.cov,
                      max(len(corpus_files), jobs.corp),
                      sum(s.harness_errors for s in jobs.states), findings, bugs, jobs.got[0] if jobs.got else 0,
                      backend, next((s.error for s in jobs.states if s.error), ""),
                      resource_findings([r for s in jobs.states for r in s.resource], jobs.protocol, jobs.preset),
                      false_alarms=false_alarms([p for _, p, _ in findings]), left=grouping.left, why=grouping.why,
                      bound=exec_bound(_runs(jobs.extra), [s.execs for s in jobs.states]))
    try:
        with (run_dir / "progress.csv").open("a") as f:  # the last row is the summary's numbers: report agrees
            f.write(f"{summary.elapsed:.1f},{summary.execs},{summary.exec_per_s:.0f},{summary.cov},"
                    f"{summary.corpus},{len(findings)},{jobs.rss}\n")
        _write_stats(run_dir / "stats.json", summary, jobs)
    except (OSError, NoSpace) as e:
        full = str(e) if isinstance(e, NoSpace) else _no_room(run_dir / "progress.csv", e)
        jobs.disk_full = jobs.disk_full or full
    if jobs.disk_full:
        remove_empty(run_dir)  # libFuzzer's artifacts and logs cut off at 0 bytes: no input, no record
        summary.disk_full = jobs.disk_full
    log_end(log, summary, jobs=len(jobs.states))
    return summary


def _runs(extra: list[str]) -> int | None:
    """The -runs=N flag of the jobs (--max-execs N, or the user's own after `--`), the last one given."""
    runs = [int(m.group(1)) for x in extra if (m := re.fullmatch(r"-runs=(\d+)", x))]
    return runs[-1] if runs else None


def _write_stats(path: Path, summary: Summary, jobs: _Jobs) -> None:
    """The run's totals and each job's libFuzzer figures, written as the run ends, as every engine writes its
    `stats.json`: a run folder without one did not reach its summary (`epfuzz report` says so; a SIGKILLed run
    read as finished: ops trial 1205 item 9)."""
    per_job = [{"execs": s.execs, "cov": s.cov, "ft": s.ft, "corp": s.corp, "restarts": s.restarts,
                "harness_errors": s.harness_errors, "error": s.error} for s in jobs.states]
    write_atomic(path, json.dumps({"engine": "libfuzzer", "elapsed": round(summary.elapsed, 1), "execs": summary.execs,
                                   "features": summary.cov, "corpus": summary.corpus,
                                   "findings": len(summary.findings), "jobs": per_job}, indent=1).encode())


def fuzz(harness: str | None, seconds: int, jobs: int = 1, backend: str = "sim", preset: str | None = None,
         extra: list[str] | None = None, run_dir: Path | None = None, seed: int | None = None,
         progress: bool = True, protocol: str | None = None) -> Summary:
    """Fuzz a built-in harness, or (with `protocol` = module:Attr) a user protocol.

    With the verbs backend on a host without RDMA, the whole campaign runs in the
    soft-RoCE guest, writing into the same run folder (shared read-write). `preset`: None is the protocol's
    home preset, as `epfuzz fuzz` and the harness take it (it was "spec" here alone: ops trial 1205).
    """
    preset = preset or home_preset(protocol or harness_protocol(harness or ""))
    if protocol:  # loads it: fails now, with the reason, if it cannot be loaded, run or complete in order
        preflight(protocol, preset)
    if get_backend(backend, require=False).where() is Where.GUEST:
        return fuzz_in_guest(harness, protocol, seconds, backend, preset, extra, run_dir, seed)
    if protocol:
        name = plugin_name(protocol)
        argv = entry_command(protocol)
    elif harness:
        name = harness_name(harness)
        argv = harness_command(name)
    else:
        raise InputError("name a harness or give --protocol module:Attr")
    log = get_logger(harness=name, backend=backend, preset=preset, engine="libfuzzer")  # as the guided one says
    claim = fresh_run_dir(run_dir, RUNS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")
    with claim.released_on_failure() as run_dir:  # nothing written: the folder is given back
        work = run_dir / "corpus"
        art = run_dir / "artifacts"
        for d in (work, art):
            d.mkdir(parents=True, exist_ok=True)
        seeds = seed_folder(name)
        cmd = [*argv, str(work)]
        if seeds is not None:
            cmd.append(str(seeds))
        tail = [f"-artifact_prefix={art}/", "-print_final_stats=1", f"--backend={backend}", f"--preset={preset}",
                "--keep-going", f"--findings-dir={run_dir}", *limits.job_flags(extra or [], backend, seconds)]
        pool = _Jobs(cmd, tail, extra or [], jobs, seconds, run_dir, seed, log)
        pool.input_timeout = limits.input_timeout(extra or [], backend, seconds)
        pool.protocol, pool.preset = protocol or name.removesuffix("_fuzzer"), preset
        old = {s: signal.signal(s, pool.stop) for s in (signal.SIGINT, signal.SIGTERM)}
        log_start(log, backend, seconds=seconds, jobs=jobs, run_dir=str(run_dir))
        try:
            for j in range(jobs):
                pool.launch(j)
            _monitor(pool, seconds, progress)
            pool.stop()
            pool.console.end()
            # the handlers stay: a signal while findings are grouped ends the grouping, not the summary
            return _summarize(name, pool, work, backend, log)
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            pool.stop()
