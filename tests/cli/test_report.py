"""`epfuzz report` on a guided run: its RSS column (all zeros before), and root causes that do not
split the markdown table's columns (a new user's trial, 2026-12-01)."""

from __future__ import annotations

from epfuzz.campaign.guided import fuzz_guided
from epfuzz.triage.report import report


def test_a_guided_runs_report_has_its_rss_and_one_cell_per_root_cause(tmp_path):
    run_dir = tmp_path / "run"
    s = fuzz_guided("deepep_v2_dispatch", 30, run_dir=run_dir, seed=1, progress=False, max_execs=200)
    assert s.bugs, "the #661 protocol's bug within 200 executions"
    text, _ = report(run_dir, png=False)
    peak = next(x for x in text.splitlines() if x.startswith("- peak RSS"))
    assert int(peak.split(":")[1].split()[0]) > 0, peak
    rows = [x for x in text.splitlines() if x.startswith("| `")]
    assert rows and all(r.replace("\\|", "").count("|") == 4 for r in rows), rows
