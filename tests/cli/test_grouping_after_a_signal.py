"""The grouping's last progress line and the summary count the same findings after a signal (cf trial 10)."""

from __future__ import annotations

import shutil
from pathlib import Path

from epfuzz.campaign.common import read_findings

ROOT = Path(__file__).resolve().parents[2]


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []

    def info(self, event: str, **kw: object) -> None:
        self.events.append((event, kw))

    error = warning = debug = info


def test_the_last_grouping_line_agrees_with_the_summary_when_a_signal_cut_it_short(tmp_path, monkeypatch):
    """After Ctrl-C the log said `fuzz.grouping done=39 total=39` while the summary said 27 of 39 and
    ungrouped.txt listed 12: the grouping counted a finding it left as done."""
    monkeypatch.setenv("EPFUZZ_CACHE_DIR", str(tmp_path / "cache"))  # nothing grouped before: every cause is work
    run = tmp_path / "run"
    run.mkdir()
    names = ["deepep661-c2b", "cross-qp-spec", "cross-qp-no-ro", "cross-qp-mlx5-default"]
    for i, name in enumerate(names):
        shutil.copy(ROOT / "corpus" / "regressions" / f"{name}.json", run / f"finding-{i}-{name}.json")
    log = _Log()
    # the signal arrives once the first bug's minimized case is written: the rest are left, as after Ctrl-C
    _, got = read_findings(run, "sim", log, stop=lambda: any((run / "bugs").glob("*.json")))
    grouped = sum(b.count for b in got.bugs)
    assert grouped >= 1 and got.left, (grouped, got.left)
    lines = [kw for event, kw in log.events if event == "fuzz.grouping"]
    assert lines[-1]["done"] == grouped and lines[-1]["total"] == grouped + len(got.left) == len(names)
    assert lines[-1]["left"] == len(got.left) and lines[-1]["why"] == got.why
    assert not any(kw["done"] == kw["total"] for kw in lines)
    assert len((run / "ungrouped.txt").read_text().splitlines()) == 1 + len(got.left)


def test_under_a_json_log_grouping_progress_is_events_on_a_terminal_too(monkeypatch):
    """On a terminal the grouping line is rewritten with \\r; under --log-format json every stderr line is an
    event (a program reads it), so there it is logged like off a terminal."""
    import io
    import sys

    from epfuzz.campaign.common import GroupingProgress
    from epfuzz.infra import log as elog

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert GroupingProgress(_Log()).tty
    elog.configure(json_lines=True)
    try:
        log = _Log()
        GroupingProgress(log)(1, 1, 1)
        assert not sys.stderr.getvalue() and [e for e, _ in log.events] == ["fuzz.grouping"]
    finally:
        elog.configure()
