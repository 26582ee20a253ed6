"""`epfuzz triage RUN` groups the run's finding cases, not its own records (user audit D12)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from epfuzz.triage.run import triage

ROOT = Path(__file__).resolve().parents[2]


def test_the_runs_stats_and_job_records_are_not_counted_as_findings(tmp_path):
    run = tmp_path / "run"
    (run / "jobs").mkdir(parents=True)
    shutil.copy(ROOT / "corpus/regressions/deepep661-c2b.json", run / "finding-deepep_v2_dispatch-0123.json")
    (run / "stats.json").write_text(json.dumps({"execs": 10, "moves": {}}))
    (run / "jobs" / "job-0.json").write_text(json.dumps({"execs": 10}))
    seen: list[tuple[int, int]] = []
    got = triage(run, progress=lambda done, total, bugs: seen.append((done, total)))
    assert seen[-1] == (1, 1), seen          # it said "1 of 3" for a run of one finding
    assert [b.count for b in got.grouping.bugs] == [1] and not got.grouping.left
