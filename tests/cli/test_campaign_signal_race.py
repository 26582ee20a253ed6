"""A SIGTERM that lands while a libFuzzer job is being started still stops that job.

Python runs a signal handler in the main thread between bytecodes, so `_Jobs.stop` can run inside
`launch`'s `subprocess.Popen` (which waits for the child's exec) before the new process is in
`procs`: the stop signalled every job but that one, which then fuzzed on until the campaign's
deadline (`--time`, then `enforce`), and the summary a container's stop asked for came minutes
late. The handler is made to run exactly there: in a Popen that calls it once the child exists.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

from epfuzz.campaign import jobs as jobs_mod
from epfuzz.campaign.libfuzzer import _Jobs, _monitor
from epfuzz.infra.log import get_logger

# a job that would run for the whole 300 s campaign unless a SIGINT ends it (Python's default handler)
_RUNS_ON = "import time; time.sleep(300)"


@pytest.fixture
def sigint_ends_jobs():
    """A job inherits an ignored SIGINT (a test run started in the background): here, as under
    `epfuzz fuzz` (whose own handler is reset to the default at exec), the job's SIGINT is the default."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _popen_signalled_during(pool: list[_Jobs]) -> type[subprocess.Popen[str]]:
    class Popen(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            pool[0].stop(signal.SIGTERM)   # the handler, run before launch() has stored the process

    return Popen


@pytest.mark.parametrize("restart", [False, True], ids=["first-launch", "restart"])
def test_a_signal_during_a_job_launch_stops_that_job(tmp_path, monkeypatch, sigint_ends_jobs, restart):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # restart: the first incarnation ends early (a harness error), the signal lands in its restart
    head = [sys.executable, "-c", "import os, sys; os.path.exists(sys.argv[1] + '/again') or os._exit(1); "
            + _RUNS_ON, str(run_dir)] if restart else [sys.executable, "-c", _RUNS_ON]
    pool = [_Jobs(head, [], [], 1, 300, run_dir, None, get_logger(harness="t"))]
    if restart:
        pool[0].launch(0)
        pool[0].procs[0].wait(timeout=60)  # type: ignore[union-attr]
        (run_dir / "again").touch()
    monkeypatch.setattr(jobs_mod.subprocess, "Popen", _popen_signalled_during(pool))
    if not restart:
        pool[0].launch(0)
    t = threading.Thread(target=_monitor, args=(pool[0], 300, False), daemon=True)
    t.start()
    t.join(timeout=30)  # the job ends at its SIGINT, in well under a second; without it, 300 s
    ended = not t.is_alive()
    if not ended:
        pool[0].signal_jobs(signal.SIGKILL)
        t.join(timeout=30)
    assert ended, "the job started as the signal landed ran on"
    assert pool[0].got == [signal.SIGTERM]
    assert pool[0].states[0].restarts == int(restart)


def _stop_reentered_at_line(k: int, head: list[str], run_dir) -> tuple[bool, int]:
    """`stop()` as the campaign's main thread calls it, with the signal handler (`stop` again) run
    at its k-th traced line, as Python may run a handler between any two lines of the main thread.
    In a thread, so that a deadlock is a join that times out: (ended, lines traced)."""
    pool = _Jobs(head, [], [], 1, 300, run_dir, None, get_logger(harness="t"))
    pool.launch(0)
    lines = [0]

    def trace(frame, event, _arg):  # noqa: ANN001, ANN202 - sys.settrace's signature
        if event == "line":
            lines[0] += 1
            if lines[0] == k:
                sys.settrace(None)
                pool.stop(signal.SIGTERM)
        return trace

    def main() -> None:
        sys.settrace(trace)
        try:
            pool.stop()
        finally:
            sys.settrace(None)

    t = threading.Thread(target=main, daemon=True)
    t.start()
    t.join(timeout=20)
    ended = not t.is_alive()
    pool.signal_jobs(signal.SIGKILL)
    for p in pool.procs:
        if p:
            p.wait(timeout=30)
    return ended, lines[0]


def test_a_signal_during_stop_is_no_deadlock(tmp_path, sigint_ends_jobs):
    """The handler may run while the main thread is inside `stop()` itself (the campaign's end, a
    deadline, a full disk; then a second Ctrl-C, or a container's SIGTERM): it must take no lock
    that the main thread may hold there (a threading.Event's set() did: the process hung until SIGKILL)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    k = 1
    while True:
        ended, lines = _stop_reentered_at_line(k, ["sleep", "300"], run_dir)
        assert ended, f"deadlock: the handler re-entered stop() at its line {k}"
        if lines < k:  # stop() ran fewer lines than k: every line has had its handler
            break
        k += 1
    assert k > 3


def test_a_job_whose_sigint_does_nothing_is_killed_seconds_after_the_stop(tmp_path):
    """A plug-in's own SIGINT handler (or SIG_IGN) replaces libFuzzer's in its job, and libFuzzer's
    handler itself is no async-signal-safe code: a job may outlive its SIGINT. The campaign no longer
    waits on it until the deadline (here 300 s): KILL_GRACE_S after the stop it is killed."""
    from epfuzz.campaign.jobs import KILL_GRACE_S

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ready = tmp_path / "ignoring"
    deaf = ("import pathlib, signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "pathlib.Path(sys.argv[1]).touch(); time.sleep(300)")
    pool = _Jobs([sys.executable, "-c", deaf, str(ready)], [], [], 1, 300, run_dir, None, get_logger(harness="t"))
    pool.launch(0)
    for _ in range(600):  # steps of 0.1 s: until the job ignores SIGINT
        if ready.exists():
            break
        threading.Event().wait(0.1)
    assert ready.exists(), "the job did not start"
    pool.stop(signal.SIGTERM)
    t = threading.Thread(target=_monitor, args=(pool, 300, False), daemon=True)
    t.start()
    t.join(timeout=30)  # KILL_GRACE_S (3 s) and a reap step; without the kill, the 300 s deadline
    ended = not t.is_alive()
    if not ended:
        pool.signal_jobs(signal.SIGKILL)
        t.join(timeout=30)
    assert ended, "a job that ignores SIGINT held the campaign after its stop"
    assert pool.states[0].restarts == 0 and KILL_GRACE_S < 10
