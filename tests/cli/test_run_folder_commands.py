"""triage, report and minimize on the folders and files a user gives them (user trial items 3, 4, 6)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from epfuzz.cases.corpus import Exists, write_atomic
from epfuzz.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
C2B = ROOT / "corpus" / "regressions" / "deepep661-c2b.json"


def test_triage_says_which_corrupt_finding_it_skipped(tmp_path, capsys):
    """A corrupt finding-*.json was left out of "from N raw finding(s)" without a word."""
    run = tmp_path / "run"
    (run / "jobs").mkdir(parents=True)
    shutil.copy(C2B, run / "finding-deepep_v2_dispatch-0123.json")
    (run / "finding-deepep_v2_dispatch-0bad.json").write_text('{"scenario": ')
    (run / "finding-deepep_v2_dispatch-1bad.json").write_text("")
    (run / "stats.json").write_text(json.dumps({"execs": 10, "moves": {}}))   # the run's records: no warning
    (run / "jobs" / "job-0.json").write_text(json.dumps({"execs": 10}))
    assert main(["triage", str(run)]) == 1
    got = capsys.readouterr()
    warnings = [x for x in got.err.splitlines() if x.startswith("epfuzz:")]
    assert warnings == [f"epfuzz: warning: skipped 2 file(s) in {run} that are no readable case (the first: "
                        "finding-deepep_v2_dispatch-0bad.json: not valid JSON (Expecting value: line 1 column 14 "
                        "(char 13)))"], got.err
    assert "1 bug(s) by root cause, from 1 raw finding(s)" in got.out


def test_triage_of_a_clean_run_folder_warns_of_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "jobs").mkdir(parents=True)
    shutil.copy(C2B, run / "finding-deepep_v2_dispatch-0123.json")
    (run / "stats.json").write_text(json.dumps({"execs": 10, "moves": {}}))
    (run / "jobs" / "job-0.json").write_text(json.dumps({"execs": 10}))
    assert main(["triage", str(run)]) == 1
    assert "epfuzz:" not in capsys.readouterr().err


def test_report_of_a_missing_folder_says_so(tmp_path, capsys):
    missing = tmp_path / "no" / "dir"
    assert main(["report", str(missing), "--no-png"]) == 2
    assert capsys.readouterr().err == f"epfuzz: no such folder: {missing}\n"
    (tmp_path / "file").write_text("")
    assert main(["report", str(tmp_path / "file")]) == 2   # before asking for matplotlib
    assert capsys.readouterr().err.startswith(f"epfuzz: {tmp_path / 'file'}: not a folder")


def test_minimize_keeps_an_existing_output_file_unless_force(tmp_path, capsys):
    out = tmp_path / "mine.json"
    out.write_text("my notes\n")
    assert main(["minimize", str(C2B), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"epfuzz: -o {out}: the file exists; --force overwrites it\n"
    assert out.read_text() == "my notes\n"
    assert main(["minimize", str(C2B), "-o", str(out), "--force"]) == 1
    assert json.loads(out.read_text())["expect"] == "finding"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.json"]   # no temporary file left


def test_a_no_replace_write_never_clobbers_a_file_that_appeared_meanwhile(tmp_path):
    """minimize checks -o before its work; a file made while it ran is still kept (the link fails)."""
    path = tmp_path / "case.json"
    write_atomic(path, b"first", replace=False)
    with pytest.raises(Exists):
        write_atomic(path, b"second", replace=False)
    assert path.read_bytes() == b"first" and [p.name for p in tmp_path.iterdir()] == ["case.json"]
