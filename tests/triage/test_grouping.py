"""Grouping is a function of the findings (issue 26): bounded in steps, never in seconds, so the same
raw findings give the same bugs on an idle machine and on a loaded one; what a bound or a signal
leaves is listed as not grouped yet, never as extra bugs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from epfuzz.triage.cache import CauseCache
from epfuzz.triage.findings import bug_table, group_findings
from tests.triage.findings import raw_findings

ROOT = Path(__file__).resolve().parents[2]

GROUP = """
import json, sys
from pathlib import Path
from epfuzz.triage.findings import group_findings
paths = sorted(Path(sys.argv[1]).glob("finding-*.json"))
g = group_findings(paths, Path(sys.argv[2]), "sim")
print(json.dumps({"bugs": [[b.cause, b.count, b.minimized, sorted(p.name for p in b.raw)] for b in g.bugs],
                  "left": len(g.left), "steps": g.steps}))
"""


def _group_in_a_fresh_process(run: Path, out: Path, cache: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", GROUP, str(run), str(out)], capture_output=True, text=True,
                       cwd=ROOT, timeout=900, env={**__import__("os").environ, "EPFUZZ_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


@pytest.mark.slow
def test_the_same_findings_give_the_same_bugs_idle_and_beside_two_busy_loops(tmp_path):
    run = tmp_path / "run"
    paths = raw_findings(run, "flag_write_signal", 80, seed=3)
    assert len(paths) >= 60
    idle = _group_in_a_fresh_process(run, tmp_path / "bugs-idle", tmp_path / "cache-idle")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = _group_in_a_fresh_process(run, tmp_path / "bugs-busy", tmp_path / "cache-busy")
    finally:
        for b in busy:
            b.kill()
            b.wait()
    assert idle == loaded
    assert idle["left"] == 0 and 2 <= len(idle["bugs"]) <= 3 and all(b[2] for b in idle["bugs"])
    assert sum(b[1] for b in idle["bugs"]) == len(paths)


def test_a_step_bound_lists_the_rest_as_not_grouped_never_as_bugs(tmp_path):
    paths = raw_findings(tmp_path / "run", "flag_write_signal", 12, seed=1)
    whole = group_findings(paths, tmp_path / "bugs", "sim")
    cut = group_findings(paths, tmp_path / "bugs-cut", "sim", max_steps=150, cache=False)
    assert whole.left == [] and cut.left and cut.why == "the grouping's bound of 150 steps was reached"
    assert all(b.minimized for b in cut.bugs)
    assert {b.cause for b in cut.bugs} <= {b.cause for b in whole.bugs}
    assert sum(b.count for b in cut.bugs) + len(cut.left) == len(paths)
    text = "\n".join(bug_table(cut, run_dir=tmp_path / "run"))
    assert f"{len(cut.left)} raw finding(s) not grouped yet (the grouping's bound of 150 steps was reached)" in text
    assert " triage " in text and "run groups them" in text


def test_a_signal_keeps_what_the_cache_knows_and_lists_the_rest(tmp_path):
    paths = raw_findings(tmp_path / "run", "flag_write_signal", 8, seed=2)
    first = group_findings(paths[:5], tmp_path / "bugs", "sim")
    assert not first.left
    stopped = group_findings(paths, tmp_path / "bugs2", "sim", stop=lambda: True)
    assert sorted(p.name for b in stopped.bugs for p in b.raw) == sorted(p.name for p in paths[:5])
    assert stopped.left == paths[5:] and stopped.why == "stopped by a signal"
    assert {b.cause for b in stopped.bugs} == {b.cause for b in first.bugs}


def test_the_cache_is_only_a_shortcut(tmp_path, monkeypatch):
    """Another code fingerprint, a corrupt file: an empty cache, and the same bugs."""
    monkeypatch.setenv("EPFUZZ_CACHE_DIR", str(tmp_path / "cache"))
    paths = raw_findings(tmp_path / "run", "deepep_v2_dispatch", 4, seed=4)
    first = group_findings(paths, tmp_path / "bugs", "sim")
    from epfuzz.protocols import get_protocol

    cache = CauseCache("deepep_v2_dispatch", "spec", "sim", get_protocol("deepep_v2_dispatch"))
    assert len(cache.entries) == len(paths)
    doc = json.loads(cache.path.read_text())
    doc["fingerprint"] = "0" * 16
    cache.path.write_text(json.dumps(doc))
    assert CauseCache("deepep_v2_dispatch", "spec", "sim", get_protocol("deepep_v2_dispatch")).entries == {}
    cache.path.write_text("{not json")
    again = group_findings(paths, tmp_path / "bugs2", "sim")
    assert [(b.cause, b.count) for b in again.bugs] == [(b.cause, b.count) for b in first.bugs]


def test_the_661_cause_names_every_knob_it_needs_and_who_pins_it(tmp_path):
    """Under its preset the table read "simplest knobs" (issue 26.4): each knob the finding needs is
    named with its value, and marked where the preset or the protocol pins it."""
    path = tmp_path / "finding-661.json"
    shutil.copy(ROOT / "corpus" / "regressions" / "deepep661-c2b.json", path)
    g = group_findings([path], tmp_path / "bugs", "sim")
    assert [b.cause for b in g.bugs] == [
        "deepep_v2_dispatch|mlx5-pci-atomic|stale-accept|C2b|mr_relaxed=True[protocol],"
        "nic_relaxed_ordering=True[preset],atomic_mode=4[preset],hca_o920=False[preset]"]
    assert g.bugs[0].minimized
