"""Issue 26.5: `epfuzz triage RUN` updates the run (bugs.csv, bugs/, what `report` shows), prints each
bug's case and replay line, and says "nothing new" when it wrote nothing."""

from __future__ import annotations

import csv

from epfuzz.cli.commands import main as cli
from tests.triage.findings import raw_findings


def test_triage_updates_the_run_then_says_nothing_new(tmp_path, capsys):
    run = tmp_path / "run"
    paths = raw_findings(run, "flag_write_signal", 10, seed=5)
    assert cli(["triage", str(run)]) == 1
    out = capsys.readouterr().out
    rows = list(csv.DictReader((run / "bugs.csv").open()))
    assert rows and sum(int(r["count"]) for r in rows) == len(paths)
    assert f"{len(rows)} bug(s) by root cause, from {len(paths)} raw finding(s)" in out
    assert out.count("replay (minimized): ") == len(rows)
    for r in rows:
        assert r["minimized"] == "True" and f"{r['case']}\n" in out
    assert "updated" in out
    assert cli(["triage", str(run)]) == 1
    again = capsys.readouterr().out
    assert "nothing new" in again and list(csv.DictReader((run / "bugs.csv").open())) == rows
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,10,50\n")
    assert cli(["report", str(run), "--no-png"]) == 0
    assert rows[0]["root_cause"].replace("|", "\\|") in (run / "report.md").read_text()


def test_triage_groups_what_the_summary_left(tmp_path, capsys):
    """The campaign's summary was stopped early: triage finishes it and removes ungrouped.txt."""
    from epfuzz.triage.findings import group_findings, write_bug_index

    run = tmp_path / "run"
    paths = raw_findings(run, "deepep_v2_dispatch", 6, seed=6)
    cut = group_findings(paths, run / "bugs", "sim", max_steps=40, cache=False)
    assert cut.left
    write_bug_index(cut, run / "bugs.csv")
    assert (run / "ungrouped.txt").read_text().startswith("the grouping's bound of 40 steps")
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,6,50\n")
    assert cli(["report", str(run), "--no-png"]) == 0
    assert f"{len(cut.left)} raw finding(s) not grouped yet" in (run / "report.md").read_text()
    assert cli(["triage", str(run)]) == 1
    assert "updated" in capsys.readouterr().out
    assert not (run / "ungrouped.txt").exists()
    assert sum(int(r["count"]) for r in csv.DictReader((run / "bugs.csv").open())) == len(paths)
