"""bench/guided_ab.py: both trees run, each in its own interpreter, and the file says which ran what."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_guided_ab_runs_both_trees(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("needs the repository's git history (git archive of the older tree)")
    out = tmp_path / "ab.json"
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "guided_ab.py"), "--base", "HEAD", "--no-build",
                          "--protocols", "deep_gdr", "--steps", "40", "--parallel", "2", "--repeat", "2",
                          "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert set(doc["runs"]) == {"base", "this", "this_tuned_gc"}
    for rows in doc["runs"].values():
        assert set(rows) == {"deep_gdr"}
        assert rows["deep_gdr"]["exec_per_s"] > 0 and len(rows["deep_gdr"]["all_exec_per_s"]) == 2
    # the older tree ran from its own unpacked copy: unbuilt there, so its pure path
    assert doc["runs"]["base"]["deep_gdr"]["path"] == "pure"
    # one engine, one seed, the same steps: the first finding is the same step in every run of one tree
    assert doc["runs"]["this"]["deep_gdr"]["first_finding"] == doc["runs"]["this_tuned_gc"]["deep_gdr"]["first_finding"]
    assert doc["ratio"] == round(doc["mean"]["this_tuned_gc"] / doc["mean"]["base"], 2)


def test_guided_ab_refuses_without_a_base(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "guided_ab.py"), "--out", str(tmp_path / "x.json")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--base" in res.stderr
    assert not (tmp_path / "x.json").exists()


def test_median_run_keeps_every_rate() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from guided_ab import median_run

    rs = [{"exec_per_s": x, "first_finding": 5} for x in (300.0, 100.0, 200.0, 900.0)]
    got = median_run(rs)
    assert got["exec_per_s"] == 200.0 and got["all_exec_per_s"] == [300.0, 100.0, 200.0, 900.0]
