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


def test_the_records_of_each_run_in_a_tree_of_runs_are_not_said_as_unreadable(tmp_path):
    """Trial 0205 item 5: `triage` of a folder holding several runs warned that each run's stats.json was "no
    readable case" (replay skips them without a word); a corrupt finding there is still said."""
    for name in ("r1", "r2"):
        run = tmp_path / name
        (run / "jobs").mkdir(parents=True)
        (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n")
        shutil.copy(ROOT / "corpus/regressions/deepep661-c2b.json", run / "finding-deepep_v2_dispatch-0123.json")
        (run / "stats.json").write_text(json.dumps({"execs": 10, "moves": {}}))
        (run / "jobs" / "job-0.json").write_text(json.dumps({"execs": 10}))
    got = triage(tmp_path)
    assert [b.count for b in got.grouping.bugs] == [2] and got.warning() == "", got.warning()
    (tmp_path / "r1" / "finding-deepep_v2_dispatch-4567.json").write_text('{"scenario": 5')
    assert triage(tmp_path).warning().startswith(f"warning: skipped 1 file(s) in {tmp_path} that are no readable "
                                                 "case (the first: finding-deepep_v2_dispatch-4567.json")
