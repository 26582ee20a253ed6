"""bench/throughput_ab.py: both trees measured, each over its own `epfuzz`, and the file says which ran what."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_throughput_ab_measures_both_trees(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("needs the repository's git history (git archive of the older tree)")
    out = tmp_path / "ab.json"
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "throughput_ab.py"), "--base", "HEAD", "--no-build",
                          "--seconds", "0.2", "--repeat", "2", "--parallel", "2", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert len(doc["runs"]["base"]) == len(doc["runs"]["this"]) == 2
    # the older tree ran from its own unpacked copy, unbuilt there: its pure path, whatever this tree runs
    assert {r["path"] for r in doc["runs"]["base"]} == {"pure"}
    for side in ("base", "this"):
        for fig, row in doc["figures"][side].items():
            assert len(row["all"]) == 2 and row["median"] == min(row["all"]) and row["median"] > 0, (side, fig)
    for fig, ratio in doc["ratio"].items():
        assert ratio == round(doc["figures"]["this"][fig]["median"] / doc["figures"]["base"][fig]["median"], 2)


def test_throughput_ab_refuses_an_unknown_commit(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("needs the repository's git history")
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "throughput_ab.py"), "--base", "no-such-commit-x",
                          "--out", str(tmp_path / "x.json")], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "no-such-commit-x" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()
