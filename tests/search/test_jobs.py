"""`--jobs 2` on the guided engine: two workers share one corpus through the run folder and the run
ends in one summary and one bug table (bounded by executions per job, never by seconds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_two_jobs_share_their_corpus_and_report_once(tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "deep_ro_signal", "--jobs", "2", "--time", "600",
                        "--max-execs", "1500", "--seed", "1", "--run-dir", str(out)], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert p.returncode == 1, p.stderr[-3000:]
    assert p.stdout.count("bug(s) by root cause") == 1 and p.stdout.count("run folder:") == 1, p.stdout
    stats = json.loads((out / "stats.json").read_text())
    assert stats["execs"] == sum(j["execs"] for j in stats["jobs"]) >= 2 * 1500
    # the jobs ran inputs the other wrote into corpus/ (a synced input runs as move "sync"); which job
    # picked up how many depends on when each started, so only that some sync happened is asserted
    assert sum(j["moves"].get("sync", {}).get("used", 0) for j in stats["jobs"]) > 0, stats["jobs"]
    own = sum(m["kept"] for j in stats["jobs"] for k, m in j["moves"].items() if k != "sync")
    assert len(list((out / "corpus").iterdir())) <= own
    assert (out / "bugs.csv").exists() and list(out.glob("finding-*.json"))
    assert (out / "progress.csv").read_text().count("\n") >= 2


def test_a_worker_started_by_hand_with_a_bad_argument_is_one_line_and_exit_2():
    for argv in ([], ["notjson"], ['{"run_dir": "x"}']):
        p = subprocess.run([sys.executable, "-m", "epfuzz.campaign.worker", *argv], capture_output=True, text=True,
                           timeout=120, cwd=ROOT)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert "epfuzz: worker: bad job argument" in p.stderr.splitlines()[-1]
