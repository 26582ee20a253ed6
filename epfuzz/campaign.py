"""`epfuzz fuzz`: run a harness under libFuzzer for a bounded time, show progress, summarise.

Each job is the harness script in its own process in --keep-going mode, writing
into a fresh run folder (`runs/<harness>-<time>/`): libFuzzer's working corpus
(seeded from corpus/<harness>/, which is never written), crash artifacts, and
one case file per bug signature. If a job dies (a harness error), it is
restarted for the time left and the error is counted. SIGINT/SIGTERM stop the
jobs; libFuzzer prints its final stats, and the summary still prints.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from epfuzz import limits, proc
from epfuzz.backends import get_backend
from epfuzz.backends.base import Where
from epfuzz.campaign_common import (
    GROUPING_SLACK_S,
    PLUGIN,
    PROGRESS_HEADER,
    ROOT,
    RUNS,
    TERM_GROUPING_S,
    Summary,
    false_alarms,
    fresh_run_dir,
    grouping_budget,
    harness_path,
    log_end,
    plugin_name,
    preflight,
    read_findings,
    resource_findings,
)
from epfuzz.campaign_guest import fuzz_in_guest
from epfuzz.corpus import LIBFUZZER_SHA1, case_paths, sha1
from epfuzz.diskspace import NoSpace, is_no_room, remove_empty
from epfuzz.errors import InputError
from epfuzz.findings import Bug, replay_command
from epfuzz.log import get_logger

#: after the deadline (plus the jobs' -timeout), seconds until a job still running gets SIGINT, then SIGKILL
STOP_GRACE_S, KILL_GRACE_S = 3.0, 3.0
STATUS = re.compile(r"#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/\S+.*?exec/s: (\d+)(?: rss: (\d+)Mb)?")


@dataclass
class JobState:
    rss: int = 0
    execs: int = 0
    cov: int = 0
    ft: int = 0
    corp: int = 0
    exec_s: int = 0
    restarts: int = 0
    harness_errors: int = 0
    error: str = ""               # the first uncaught exception of the job, with the user's line if any
    lines: list[str] = field(default_factory=list)
    resource: list[tuple[str, str]] = field(default_factory=list)  # (hang|oom, artifact) libFuzzer wrote
    pending: str = ""             # the kind of resource finding whose artifact line comes next
    done: bool = False            # libFuzzer printed its "Done N runs" line: the job ended as libFuzzer ends
    disk_full: str = ""           # the job (or its log) found no room to write: why, in one line


ARTIFACT = re.compile(r"Test unit written to (\S+)")
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')


def _exception(st: JobState, lines: list[str]) -> None:
    """atheris prints an uncaught exception (to stdout) as '=== Uncaught Python exception: ===', the
    exception's line, then its traceback: keep the first, with its innermost frame in the plug-in's
    code (as the CLI names it: REGISTRY.where), so the summary says what broke instead of a count."""
    from epfuzz.protocols import REGISTRY

    if lines and lines[0].strip().startswith("MemoryError"):  # the crash artifact that follows is an oom
        st.pending = "oom"
    if st.error or not lines:
        return
    frames = [(m.group(1), int(m.group(2)), m.group(3)) for x in lines[1:] if (m := FRAME.match(x))]
    st.error = lines[0].strip() + REGISTRY.where_in(frames)


NO_ROOM_LINE = re.compile(r"^(no space left|file too large) on ")


def _no_room(path: Path, e: OSError) -> str:
    """The one line of a write that found no room; anything else is raised again."""
    if not is_no_room(e):
        raise e
    return str(NoSpace(path, e))


def _reader(proc: subprocess.Popen[str], st: JobState, log_file: Path) -> None:
    assert proc.stdout is not None  # libFuzzer's stderr and atheris' stdout, merged
    exc: list[str] | None = None   # the lines of an uncaught exception being read
    try:
        lf: TextIO | None = log_file.open("a")
    except OSError as e:
        lf, st.disk_full = None, _no_room(log_file, e)
    try:
        for line in proc.stdout:
            if lf is not None:
                try:
                    lf.write(line)
                except OSError as e:  # a full disk: keep reading the job (its stats), stop logging it
                    st.disk_full = st.disk_full or _no_room(log_file, e)
                    _close(lf)
                    lf = None
            if line.startswith("epfuzz: ") and NO_ROOM_LINE.match(line[8:]):  # the job's own write failed
                st.disk_full = st.disk_full or line[8:].strip()
            if exc is not None:
                if line.strip() and not line.startswith(("==", "SUMMARY:", "MS:", "INFO:")):
                    exc.append(line)
                    continue
                if line.strip() or len(exc) > 1:
                    _exception(st, exc)
                    exc = None
            if "=== Uncaught Python exception: ===" in line:
                exc = []
                continue
            if (art := ARTIFACT.search(line)) is not None:  # libFuzzer names it: timeout-*, oom-*, crash-*
                base = os.path.basename(art.group(1))
                kind = "hang" if base.startswith("timeout-") else "oom" if base.startswith("oom-") else st.pending
                if kind:
                    st.resource.append((kind, art.group(1)))
                st.pending = ""
            m = STATUS.search(line)
            if m:
                st.execs, st.cov, st.ft, st.corp, st.exec_s = (int(m.group(i)) for i in (1, 3, 4, 5, 6))
                if m.group(7):
                    st.rss = int(m.group(7))
            elif line.startswith("Done ") and " runs in " in line:
                st.done = True
            elif line.startswith("stat::number_of_executed_units:"):  # exact, where the last status lags
                st.execs = int(line.split(":")[-1])
            elif "harness error" in line or "HarnessError" in line:
                st.harness_errors += 1
            elif "=== epfuzz finding" in line:
                st.lines.append(line.strip())
    finally:
        if lf is not None:
            _close(lf)


def _close(f: TextIO) -> None:
    """Close a log whose last buffered lines may find the disk full: they are lost, not raised."""
    try:
        f.close()
    except OSError:
        with contextlib.suppress(OSError):
            f.close()


class _Jobs:
    """The libFuzzer processes of one campaign: launched, restarted after a crash, stopped on a signal.

    One object instead of closures over shared lists, so each step of the loop is a method
    a reader can find (and `fuzz` stays a short script of them)."""

    def __init__(self, head: list[str], tail: list[str], extra: list[str], jobs: int, seconds: int,
                 run_dir: Path, seed: int | None, log: object) -> None:
        # a job's command: head, its -max_total_time, tail, its -seed, extra, as `fuzz` always built it
        self.head, self.tail, self.extra = head, tail, extra
        self.run_dir, self.seed, self.log = run_dir, seed, log
        self.start = time.monotonic()
        self.deadline = self.start + seconds
        self.states = [JobState() for _ in range(jobs)]
        self.procs: list[subprocess.Popen[str] | None] = [None] * jobs
        self.readers: list[threading.Thread | None] = [None] * jobs
        self.base = [0] * jobs  # execs of earlier (restarted) incarnations of each job
        self.stopping = threading.Event()
        self.got: list[int] = []
        self.resources_at = [0] * jobs  # resource findings of each job when it was (re)launched
        self.grouping = False           # a signal now ends the grouping at once (limits.DeadlinePassed)
        self.input_timeout = 0          # libFuzzer's -timeout of the jobs: how long a stuck input may take
        self.protocol, self.preset = "", "spec"  # what a raw artifact replays under
        self.disk_full = ""             # why the campaign stopped writing, when a disk filled

    def launch(self, j: int) -> None:
        left = max(1, int(self.deadline - time.monotonic()))
        seed = [] if self.seed is None else [f"-seed={self.seed + j + 1000 * self.states[j].restarts}"]
        cmd = [*self.head, f"-max_total_time={left}", *self.tail, *seed, *self.extra]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", start_new_session=True, preexec_fn=proc.die_with_parent)
        self.resources_at[j] = len(self.states[j].resource)
        self.states[j].done = False
        self.procs[j] = p
        t = threading.Thread(target=_reader, args=(p, self.states[j], self.run_dir / f"job{j}.log"), daemon=True)
        t.start()
        self.readers[j] = t

    def stop(self, signum: int = 0, *_: object) -> None:
        if signum:
            self.got.append(signum)
        self.stopping.set()
        self.signal_jobs(signal.SIGINT)
        if signum and self.grouping:  # a signal while the findings are grouped: the summary now
            raise limits.DeadlinePassed()

    def signal_jobs(self, sig: int) -> None:
        for p in self.procs:
            if p and p.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)

    def enforce(self, now: float) -> None:
        """The campaign's bound, whatever its jobs do: a job still running `input_timeout` + STOP_GRACE_S
        after the deadline (stuck in an input libFuzzer's -timeout has had time to report) gets
        SIGINT, and KILL_GRACE_S later SIGKILL (a job stuck after a MemoryError ran 120 s on)."""
        late = now - self.deadline - self.input_timeout - STOP_GRACE_S
        if late >= 0 and not self.stopping.is_set():
            self.stopping.set()
            self.signal_jobs(signal.SIGINT)
        if late >= KILL_GRACE_S:
            self.signal_jobs(signal.SIGKILL)

    def reap(self) -> bool:
        """Restart a job that died early; False once every job has ended. A full disk ends them all:
        no job can write what it finds."""
        if not self.disk_full:
            self.disk_full = next((s.disk_full for s in self.states if s.disk_full), "")
            if self.disk_full:
                self.stopping.set()
                self.signal_jobs(signal.SIGINT)
        alive = False
        for j, p in enumerate(self.procs):
            if p is None:
                continue
            if p.poll() is None:
                alive = True
                continue
            reader = self.readers[j]
            if reader:
                reader.join(timeout=5)
            if self.states[j].disk_full and not self.disk_full:  # it ended for want of room: so do the others
                self.disk_full = self.states[j].disk_full
                self.stopping.set()
                self.signal_jobs(signal.SIGINT)
            # a job that ended early: a crash, or exit 0 without libFuzzer's "Done" (a plug-in's os._exit(0))
            early = p.returncode != 0 or not self.states[j].done
            if early and not self.stopping.is_set() and time.monotonic() < self.deadline - 1:
                if len(self.states[j].resource) == self.resources_at[j]:  # not a hang/oom libFuzzer reported
                    self.states[j].harness_errors += 1
                    if not self.states[j].error:
                        self.states[j].error = (f"job {j} ended early with exit code {p.returncode} and no error "
                                                "of its own (a plug-in calling os._exit? a signal?)")
                self.states[j].restarts += 1
                self.base[j] += self.states[j].execs
                self.log.warning("fuzz.job_restart", job=j, returncode=p.returncode)  # type: ignore[attr-defined]
                self.launch(j)
                alive = True
            else:
                self.procs[j] = None
        return alive

    @property
    def execs(self) -> int:
        return sum(self.base) + sum(s.execs for s in self.states)

    @property
    def cov(self) -> int:
        return max(s.cov for s in self.states)

    @property
    def corp(self) -> int:
        return max(s.corp for s in self.states)

    @property
    def rss(self) -> int:
        return sum(s.rss for s in self.states)


def _monitor(jobs: _Jobs, seconds: int, progress: bool, log: object) -> None:
    """Until every job has ended: a progress.csv row a second, a progress note (a line on a terminal).
    A full disk ends the campaign (its summary still prints)."""
    try:
        with (jobs.run_dir / "progress.csv").open("a") as csv:
            _rows(jobs, seconds, progress, log, csv)
    except OSError as e:
        jobs.disk_full = jobs.disk_full or _no_room(jobs.run_dir / "progress.csv", e)
        jobs.stopping.set()
        jobs.signal_jobs(signal.SIGINT)
        while jobs.reap():
            jobs.enforce(time.monotonic())
            time.sleep(0.5)


def _rows(jobs: _Jobs, seconds: int, progress: bool, log: object, csv: TextIO) -> None:
    last_note = last_row = 0.0
    tty = progress and sys.stderr.isatty()
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
        if progress and (tty or now - last_note >= 10):
            left = max(0, jobs.deadline - now)
            if tty:
                sys.stderr.write(f"\r[{el:5.0f}s / {seconds}s, {left:4.0f}s left] execs {execs} "
                                 f"({execs / el if el else 0:.0f}/s) cov {jobs.cov} corpus {jobs.corp} "
                                 f"findings {n_find}   ")
                sys.stderr.flush()
            else:
                log.info("fuzz.progress", elapsed=round(el), left=round(left),  # type: ignore[attr-defined]
                         execs=execs, cov=jobs.cov, findings=n_find)
            last_note = now
        time.sleep(0.5)


def _summarize(name: str, jobs: _Jobs, work: Path, backend: str, log: object,
               seconds: float | None = None) -> Summary:
    """Read the run folder back: raw findings, bugs by root cause, the summary and its log lines."""
    run_dir = jobs.run_dir
    for t in jobs.readers:  # libFuzzer's final stats land in the job logs before the summary is read
        if t:
            t.join(timeout=5)
    if not any(jobs.procs):  # libFuzzer's SIGINT handler _Exit()s a job mid-write: its temp file is garbage
        for tmp in run_dir.glob(".finding-*"):
            tmp.unlink(missing_ok=True)
    signals = len(jobs.got)  # the one that ended the fuzzing (if any) does not end the grouping; a later one does
    # after a SIGTERM (a container stopping: SIGKILL follows in 10-30 s) the summary comes first
    budget = TERM_GROUPING_S if jobs.got and jobs.got[0] == signal.SIGTERM else grouping_budget(seconds)
    if jobs.disk_full:  # no room for minimized cases: group by raw signature, write nothing new
        budget = 0

    def group(seconds: float) -> tuple[list[tuple[str, Path, str]], list[Bug]]:
        return read_findings(run_dir, backend, log, budget=seconds, stop=lambda: len(jobs.got) > signals)

    jobs.grouping = True
    try:
        findings, bugs = limits.within(budget + GROUPING_SLACK_S, lambda: group(budget),
                                       lambda: group(0))  # the rest by raw signature
    except NoSpace as e:
        jobs.disk_full = jobs.disk_full or str(e)
        findings, bugs = group(0)
    finally:
        jobs.grouping = False
    corpus_files = []
    for p in case_paths([work]):
        if sha1(p.read_bytes()) == p.name:
            corpus_files.append(p)
        elif jobs.disk_full and LIBFUZZER_SHA1.fullmatch(p.name):  # half-written when the disk filled
            p.unlink(missing_ok=True)
    summary = Summary(name, run_dir, time.monotonic() - jobs.start, jobs.execs, jobs.cov, len(corpus_files),
                      sum(s.harness_errors for s in jobs.states), findings, bugs, jobs.got[0] if jobs.got else 0,
                      backend, next((s.error for s in jobs.states if s.error), ""),
                      resource_findings([r for s in jobs.states for r in s.resource], jobs.protocol, jobs.preset),
                      false_alarms=false_alarms([p for _, p, _ in findings]))
    try:
        with (run_dir / "progress.csv").open("a") as f:  # the last row is the summary's numbers: report agrees
            f.write(f"{summary.elapsed:.1f},{summary.execs},{summary.exec_per_s:.0f},{summary.cov},"
                    f"{summary.corpus},{len(findings)},{jobs.rss}\n")
    except OSError as e:
        jobs.disk_full = jobs.disk_full or _no_room(run_dir / "progress.csv", e)
    if jobs.disk_full:
        remove_empty(run_dir)  # libFuzzer's artifacts and logs cut off at 0 bytes: no input, no record
        summary.disk_full = jobs.disk_full
    for sig, path, text in findings:  # every raw finding is in the run folder; the log names each bug once
        log.debug("fuzz.finding", signature=sig, case=str(path),  # type: ignore[attr-defined]
                  replay=replay_command(path, backend), summary=text)
    log_end(log, summary, cov=summary.cov, harness_errors=summary.harness_errors)
    return summary


def fuzz(harness: str | None, seconds: int, jobs: int = 1, backend: str = "sim", preset: str = "spec",
         extra: list[str] | None = None, run_dir: Path | None = None, seed: int | None = None,
         progress: bool = True, protocol: str | None = None) -> Summary:
    """Fuzz a built-in harness, or (with `protocol` = module:Attr) a user protocol.

    With the verbs backend on a host without RDMA, the whole campaign runs in the
    soft-RoCE guest, writing into the same run folder (shared read-write).
    """
    if get_backend(backend, require=False).where() is Where.GUEST:
        return fuzz_in_guest(harness, protocol, seconds, backend, preset, extra, run_dir, seed)
    if protocol:
        preflight(protocol, preset)  # loads it: fails now, with the reason, if it cannot be loaded or run
        script, name = PLUGIN, plugin_name(protocol)
    elif harness:
        script = harness_path(harness)
        name = script.stem
    else:
        raise InputError("name a harness or give --protocol module:Attr")
    log = get_logger(harness=name, backend=backend, preset=preset)
    run_dir = fresh_run_dir(run_dir, RUNS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")
    work = run_dir / "corpus"
    art = run_dir / "artifacts"
    for d in (work, art):
        d.mkdir(parents=True, exist_ok=True)
    seeds = ROOT / "corpus" / name
    cmd = [sys.executable, str(script), str(work)]
    if protocol:
        cmd.append(f"--protocol={protocol}")
    if seeds.is_dir():
        cmd.append(str(seeds))
    tail = [f"-artifact_prefix={art}/", "-print_final_stats=1", f"--backend={backend}", f"--preset={preset}",
            "--keep-going", f"--findings-dir={run_dir}", *limits.job_flags(extra or [], backend, seconds)]
    pool = _Jobs(cmd, tail, extra or [], jobs, seconds, run_dir, seed, log)
    pool.input_timeout = limits.input_timeout(extra or [], backend, seconds)
    pool.protocol, pool.preset = protocol or name.removesuffix("_fuzzer"), preset
    old = {s: signal.signal(s, pool.stop) for s in (signal.SIGINT, signal.SIGTERM)}
    log.info("fuzz.start", seconds=seconds, jobs=jobs, run_dir=str(run_dir))
    try:
        for j in range(jobs):
            pool.launch(j)
        _monitor(pool, seconds, progress, log)
        pool.stop()
        if progress and sys.stderr.isatty():
            sys.stderr.write("\n")
        # the handlers stay: a signal while findings are grouped ends the grouping, not the summary
        return _summarize(name, pool, work, backend, log, seconds)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        pool.stop()
