"""`epfuzz fuzz --engine guided --jobs N`: a job that does not end after the forwarded SIGTERM is killed
KILL_GRACE_S later, so a container's stop (SIGTERM, then its own SIGKILL after a grace of some seconds)
finds the campaign's summary written instead of a parent still waiting on its workers."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from epfuzz.campaign import guided_jobs
from epfuzz.campaign.jobs import KILL_GRACE_S

#: a worker whose plug-in code replaced its SIGTERM handler: it says when it is deaf, then runs on
DEAF = ("import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "pathlib.Path(sys.argv[1]).write_text('deaf'); time.sleep(300)")


def _watch_in_thread(procs: list[subprocess.Popen[bytes]], run_dir: Path, stopped: list[int]) -> threading.Thread:
    t = threading.Thread(target=guided_jobs._watch, args=(procs, run_dir, time.monotonic(), stopped, 300.0, False),
                         daemon=True)
    t.start()
    return t


def test_a_job_that_ignores_the_stop_is_killed_after_the_grace(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "corpus").mkdir()
    ready = tmp_path / "ready"
    procs = [subprocess.Popen([sys.executable, "-c", DEAF, str(ready)])]
    try:
        for _ in range(600):  # steps of 0.1 s, not a deadline: until the job has replaced its handler
            if ready.exists():
                break
            time.sleep(0.1)
        assert ready.exists()
        stopped = [int(signal.SIGTERM)]
        t0 = time.monotonic()
        t = _watch_in_thread(procs, tmp_path, stopped)
        t.join(timeout=60)  # without the kill: the job's 300 s sleep
        assert not t.is_alive(), "the campaign waited on a job that ignored its SIGTERM"
        assert procs[0].returncode == -signal.SIGKILL
        assert time.monotonic() - t0 >= KILL_GRACE_S  # it had its grace first
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_job_that_honours_the_stop_is_not_killed(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "corpus").mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])]
    try:
        t = _watch_in_thread(procs, tmp_path, [int(signal.SIGTERM)])
        t.join(timeout=60)
        assert not t.is_alive()
        assert procs[0].returncode == -signal.SIGTERM  # the forwarded stop ended it; no SIGKILL was needed
    finally:
        if procs[0].poll() is None:
            procs[0].kill()
            procs[0].wait()
