"""A libFuzzer run resumed from old corpus folders, and one SIGKILLed, as an unattended operator meets them.

Operator trial 1205 item 9: `epfuzz fuzz H -- OLD/corpus` fuzzed on the old inputs but its summary said
"corpus 0" (it counted only the run's own corpus/, where libFuzzer copies nothing it was given); and after
SIGKILL `epfuzz report RUN` read as a finished run (no word that it was killed, and no stats.json)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.cli.test_output_for_people import epfuzz

CLEAN = "deepep_v2_dispatch_fixed"  # no findings: no grouping after the fuzzing


def test_a_resumed_libfuzzer_run_counts_the_corpus_it_was_given(tmp_path):
    old = epfuzz("fuzz", CLEAN, "--seed", "1", "--max-execs", "300", "--run-dir", str(tmp_path / "old"), cwd=tmp_path)
    assert old.returncode == 0, old.stderr[-2000:]
    assert len(os.listdir(tmp_path / "old" / "corpus")) > 0
    # -runs=1: libFuzzer reads its corpus folders, then stops; nothing new is copied into the run's corpus/
    p = epfuzz("--log-format", "json", "fuzz", CLEAN, "--engine", "libfuzzer", "--max-execs", "1", "--run-dir",
               str(tmp_path / "new"), "--", str(tmp_path / "old" / "corpus"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    inited = re.search(r"INITED cov: \d+ ft: \d+ corp: (\d+)/", (tmp_path / "new" / "job0.log").read_text())
    assert inited, (tmp_path / "new" / "job0.log").read_text()[-2000:]
    corp = int(inited.group(1))
    end = next(json.loads(x) for x in p.stderr.splitlines() if '"fuzz.summary"' in x)
    assert corp > 0 and end["corpus"] == corp, (corp, end)
    assert f"corpus {corp}," in p.stdout
    last = (tmp_path / "new" / "progress.csv").read_text().splitlines()[-1].split(",")
    assert int(last[4]) == corp  # report's figure is the summary's
    # a finished run has its stats.json, and its report says nothing of being incomplete
    assert json.loads((tmp_path / "new" / "stats.json").read_text())["corpus"] == corp
    r = epfuzz("report", str(tmp_path / "new"), cwd=tmp_path)
    assert r.returncode == 0 and "incomplete" not in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("engine", ["libfuzzer", "guided"])
def test_the_report_of_a_sigkilled_run_says_it_did_not_finish(tmp_path, engine):
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "epfuzz", "fuzz", "flag_write_signal", "--engine", engine,
                             "--time", "120", "--run-dir", str(run)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 100  # a wait for the run to be under way, not a bound on its result
        while time.monotonic() < deadline:
            rows = (run / "progress.csv").read_text().splitlines() if (run / "progress.csv").exists() else []
            if len(rows) >= 3 and list(run.glob("finding-*.json")):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the run wrote no progress rows")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the campaign and its jobs, as the OOM killer or a lost machine
        proc.wait()
    assert not (run / "stats.json").exists()
    r = epfuzz("report", str(run), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = next((x for x in r.stdout.splitlines() if "incomplete" in x), "")
    assert "did not reach its summary" in line and "triage" in line, r.stdout[:2000]
