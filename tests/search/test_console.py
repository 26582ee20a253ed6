"""The console every campaign shows itself through: one progress line, one line per raw finding."""

from __future__ import annotations

import io

import pytest

from epfuzz.infra import log as elog
from epfuzz.search import monitor
from epfuzz.search.monitor import Console, finding_line, parse_finding


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(text: str) -> list[str]:
    """What a terminal shows of `text`: \\r returns to the line's start, ESC[K clears the line."""
    lines, cur, col = [], [], 0
    i = 0
    while i < len(text):
        if text.startswith("\x1b[K", i):
            del cur[col:]
            i += 3
            continue
        ch = text[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("".join(cur).rstrip())
            cur, col = [], 0
        else:
            cur[col:col + 1] = [ch]
            col += 1
        i += 1
    return lines + (["".join(cur).rstrip()] if cur else [])


@pytest.fixture(autouse=True)
def _human_log():
    elog.configure(json_lines=False)
    yield
    elog.configure(json_lines=False)


def test_on_a_terminal_a_finding_takes_the_progress_lines_place_and_no_blank_line_appears():
    """User audit D11: a newline before every finding left a blank line between two findings."""
    out = Tty()
    c = Console(out)
    c.progress(2.0, 10, 100, 5, 3, 0)
    c.finding("s1", "epfuzz run a.json")
    c.finding("s2", "epfuzz run b.json")
    c.progress(3.0, 10, 150, 5, 3, 2)
    c.end()
    assert screen(out.getvalue()) == [finding_line("s1", "epfuzz run a.json"),
                                      finding_line("s2", "epfuzz run b.json"),
                                      "[    3s / 10s] execs 150 (50/s) features 5 corpus 3 findings 2"]
    assert out.getvalue().endswith("\n")


def test_off_a_terminal_progress_is_a_plain_line_every_so_often(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(monitor.time, "monotonic", lambda: now[0])
    out = io.StringIO()
    c = Console(out)
    for t in range(0, 25):
        now[0] = 100.0 + t
        c.progress(float(t), 60, t * 10, 1, 1, 0)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and all(x.startswith("progress: [") for x in lines), lines   # at 1 s, 11 s, 21 s


def test_a_relayed_finding_is_shown_once_and_other_lines_are_not():
    """Two --jobs workers that find one signature write one case: the run shows it once."""
    out = io.StringIO()
    c = Console(out)
    line = finding_line("stale accept", "epfuzz run run/finding-x.json")
    assert parse_finding(line) == ("stale accept", "epfuzz run run/finding-x.json")
    assert c.relay(line + "\n") and c.relay(line)
    assert not c.relay("#1024 NEW cov: 12 ft: 30 corp: 4/40b exec/s: 512")
    assert c.relay("=== FALSE ALARM: p is expected clean; this is a bug in the model\n")
    assert out.getvalue().splitlines() == [line, "=== FALSE ALARM: p is expected clean; this is a bug in the model"]


def test_in_a_json_log_findings_and_progress_are_events(capsys):
    elog.configure(json_lines=True)
    c = Console()
    c.finding("stale accept", "epfuzz run f.json", "=== FALSE ALARM: p is expected clean\n")
    err = capsys.readouterr().err.splitlines()
    assert all(x.startswith("{") for x in err) and len(err) == 2
    assert '"fuzz.finding"' in err[0] and '"replay": "epfuzz run f.json"' in err[0] and "fuzz.false_alarm" in err[1]


def test_quiet_shows_no_raw_finding_nor_false_alarm_line(monkeypatch):
    """An author's trial: `-q` (the summary and the bug table only) still printed every "=== FALSE ALARM"
    line; the summary says how many there were and names one."""
    monkeypatch.setenv("EPFUZZ_QUIET", "1")
    out = io.StringIO()
    c = Console(out)
    c.finding("stale accept", "epfuzz run f.json", "=== FALSE ALARM: p is expected clean\n")
    assert c.relay("=== FALSE ALARM: p is expected clean; this is a bug in the model\n")
    assert out.getvalue() == ""
