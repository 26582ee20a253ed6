"""The libFuzzer processes of one `epfuzz fuzz` campaign: launched, read, restarted, bounded.

Each job is the harness script in its own process (and session) in --keep-going mode; a
thread per job copies its output to `jobN.log` and reads from it the status lines, the first
uncaught exception (with the plug-in's line), the artifacts libFuzzer's per-input limits wrote
(`timeout-*`, `oom-*`) and a full disk. A job that dies early is restarted for the time left; a
job still running past the campaign's bound is ended (SIGINT, then SIGKILL); every job dies with
the campaign (PR_SET_PDEATHSIG). Once the campaign stops (a signal, a full disk, the bound), a job
that has not ended KILL_GRACE_S after its SIGINT gets SIGKILL: the summary never waits on a job
whose SIGINT did nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from epfuzz.infra import proc
from epfuzz.infra.diskspace import NoSpace, is_no_room
from epfuzz.search.monitor import Console

#: after the deadline (plus the jobs' -timeout), seconds until a job still running gets SIGINT; after any
#: stop's SIGINT, seconds until a job still running gets SIGKILL
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


def _reader(proc: subprocess.Popen[str], st: JobState, log_file: Path, console: Console) -> None:
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
            else:
                console.relay(line)   # a raw finding or false alarm of the job, shown as the campaign's own
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
        # a plain flag, not a threading.Event: `stop` is a signal handler, which Python may run between
        # any two lines of the main thread, inside an Event.set() holding its lock too (a deadlock
        # until SIGKILL); only the main thread reads or sets it
        self.stopping = False
        self.stopped_at = 0.0           # when `stopping` was set: KILL_GRACE_S later a job still running is killed
        self.got: list[int] = []
        self.resources_at = [0] * jobs  # resource findings of each job when it was (re)launched
        self.input_timeout = 0          # libFuzzer's -timeout of the jobs: how long a stuck input may take
        self.protocol, self.preset = "", "spec"  # what a raw artifact replays under
        self.disk_full = ""             # why the campaign stopped writing, when a disk filled
        self.console = Console(log=log)  # the progress line and each job's raw findings, as one run's

    def launch(self, j: int) -> None:
        left = max(1, int(self.deadline - time.monotonic()))
        seed = [] if self.seed is None else [f"-seed={self.seed + j + 1000 * self.states[j].restarts}"]
        cmd = [*self.head, f"-max_total_time={left}", *self.tail, *seed, *self.extra]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", start_new_session=True, preexec_fn=proc.die_with_parent)
        self.resources_at[j] = len(self.states[j].resource)
        self.states[j].done = False
        self.procs[j] = p
        t = threading.Thread(target=_reader, args=(p, self.states[j], self.run_dir / f"job{j}.log", self.console),
                             daemon=True)
        t.start()
        self.readers[j] = t
        # a signal's handler (`stop`) runs between bytecodes, so it may have run inside Popen (which waits
        # for the exec) before `procs` held this job: that stop missed it, and it would fuzz on to the
        # deadline (minutes) with the summary waiting on it. Whatever stop ran before this line, this job
        # gets it now; any stop after it finds the job in `procs`.
        if self.stopping:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGINT)

    def stop(self, signum: int = 0, *_: object) -> None:
        """The SIGINT/SIGTERM handler (and the campaign's end): every job gets SIGINT, which libFuzzer
        turns into its final stats and an exit."""
        if signum:
            self.got.append(signum)
        self.stop_jobs()

    def stop_jobs(self) -> None:
        """SIGINT to every job, now and to any launched later; `enforce` kills what is left KILL_GRACE_S
        on: a job whose SIGINT does nothing (a plug-in's own SIGINT handler, or one that ignores it, replaces
        libFuzzer's) ran on to the deadline, minutes, with the summary a container's stop asked for waiting."""
        if not self.stopping:
            self.stopping, self.stopped_at = True, time.monotonic()
        self.signal_jobs(signal.SIGINT)

    def signal_jobs(self, sig: int) -> None:
        for p in self.procs:
            if p and p.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)

    def enforce(self, now: float) -> None:
        """The campaign's bound, whatever its jobs do: a job still running `input_timeout` + STOP_GRACE_S
        after the deadline (stuck in an input libFuzzer's -timeout has had time to report) gets
        SIGINT, and a job still running KILL_GRACE_S after any stop's SIGINT gets SIGKILL (a job stuck
        after a MemoryError ran 120 s on)."""
        late = now - self.deadline - self.input_timeout - STOP_GRACE_S
        if late >= 0 and not self.stopping:
            self.stop_jobs()
        if self.stopping and now - self.stopped_at >= KILL_GRACE_S:
            self.signal_jobs(signal.SIGKILL)

    def reap(self) -> bool:
        """Restart a job that died early; False once every job has ended. A full disk ends them all:
        no job can write what it finds."""
        if not self.disk_full:
            self.disk_full = next((s.disk_full for s in self.states if s.disk_full), "")
            if self.disk_full:
                self.stop_jobs()
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
                self.stop_jobs()
            # a job that ended early: a crash, or exit 0 without libFuzzer's "Done" (a plug-in's os._exit(0))
            early = p.returncode != 0 or not self.states[j].done
            if early and not self.stopping and time.monotonic() < self.deadline - 1:
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
