"""The collector settings of epfuzz's own processes (`epfuzz.infra.proc.tune_gc`, issue 31).

A process-wide setting: the entry points make it, library calls never do. Each check runs in a fresh
interpreter, so this test process keeps CPython's defaults."""

from __future__ import annotations

import subprocess
import sys

from epfuzz.infra.proc import GC_THRESHOLD

PROBE = ("import gc, sys\n{body}\nprint(gc.get_threshold() == {thr!r}, gc.get_freeze_count() > 0)\n")


def _probe(body: str) -> str:
    code = PROBE.format(body=body, thr=GC_THRESHOLD)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().splitlines()[-1]


def test_cli_entry_tunes_the_collector() -> None:
    body = "from epfuzz.cli.entry import main\nrc = main(['list'])\nassert rc == 0, rc"
    assert _probe(body) == "True True"


def test_library_imports_leave_the_collector_alone() -> None:
    body = ("import epfuzz.search.engines.guided, epfuzz.sim.engine, epfuzz.continuous.harness\n"
            "import epfuzz.campaign.worker")
    assert _probe(body) == "False False"


def test_tune_gc_once_per_process() -> None:
    body = ("from epfuzz.infra.proc import tune_gc\ntune_gc()\nn = gc.get_freeze_count()\nx = [[] for _ in range(50)]\n"
            "tune_gc()\nassert gc.get_freeze_count() == n, (gc.get_freeze_count(), n)")
    assert _probe(body) == "True True"
