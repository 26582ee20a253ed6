"""The summary's grouping is bounded by the campaign's own time and ends on a signal with the
summary still written (a 10 s plug-in campaign with 666 raw signatures spent 120 s more grouping,
and a SIGTERM then left no summary and no bugs.csv)."""

from __future__ import annotations

import shutil
from pathlib import Path

from epfuzz.campaign_common import grouping_budget
from epfuzz.findings import group_findings

ROOT = Path(__file__).resolve().parents[2]


def test_the_budget_is_the_campaigns_time_between_30_and_120_s():
    assert grouping_budget(5) == 30
    assert grouping_budget(60) == 60
    assert grouping_budget(3600) == 120
    assert grouping_budget(None) == 120


def test_a_stop_request_groups_the_rest_by_raw_signature(tmp_path):
    cases = sorted((ROOT / "corpus" / "regressions").glob("deepep661-*.json"))[:3]
    assert cases
    paths = []
    for i, c in enumerate(cases):
        paths.append(tmp_path / f"finding-{i}.json")
        shutil.copy(c, paths[-1])
    minimized = group_findings(paths, tmp_path / "bugs", "sim")
    raw = group_findings(paths, tmp_path / "bugs2", "sim", stop=lambda: True)
    assert any(b.minimized for b in minimized)
    assert not any(b.minimized for b in raw) and sum(b.count for b in raw) == len(paths)
    assert not (tmp_path / "bugs2").exists() or not any((tmp_path / "bugs2").iterdir())
