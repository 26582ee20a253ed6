"""Exit codes and one-line errors for bad input; replay never writes to corpus/."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from epfuzz.cli.commands import main as cli

ROOT = Path(__file__).resolve().parents[2]


def test_replay_all_regressions_and_seeds():
    before = {p: p.stat().st_mtime_ns for p in (ROOT / "corpus").rglob("*") if p.is_file()}
    assert cli(["replay", str(ROOT / "corpus" / "regressions"), *map(str, (ROOT / "corpus").glob("*_fuzzer"))]) == 0
    after = {p: p.stat().st_mtime_ns for p in (ROOT / "corpus").rglob("*") if p.is_file()}
    assert before == after


def test_every_case_file_in_the_corpus_loads():
    """Including corpus/cuda, which only a GPU replays: a field appended to the IR can make a raw
    fuzzer input decode differently, and that must fail here, on every machine."""
    from epfuzz.cases.corpus import load_case

    cases = sorted((ROOT / "corpus").rglob("*.json"))
    assert any(p.parent.name == "cuda" for p in cases)
    for p in cases:
        load_case(p)


def test_replay_reports_a_changed_verdict(tmp_path):
    case = json.loads((ROOT / "corpus/regressions/deepep674-fixed.json").read_text())
    case["expect"] = "finding"
    (tmp_path / "c.json").write_text(json.dumps(case))
    assert cli(["replay", str(tmp_path / "c.json")]) == 1


@pytest.mark.parametrize("content, message", [
    (b"", "empty file"),
    (b"{\"scenario\": ", "not valid JSON"),
    (b"[1, 2]", "expected a JSON object"),
    # new-user trial item 9: "got NoneType", a Python type's name for JSON's null
    (b"{\"scenario\": null, \"expect\": \"finding\"}", "'<root>': expected a JSON object {...}, got null"),
    (b"{\"scenario\": [1], \"expect\": \"finding\"}", "expected a JSON object {...}, got an array [...]"),
    (b"{\"scenario\": {\"payload\": {\"num_tokens\": 1000}}, \"expect\": \"finding\"}", "payload.num_tokens"),
    (b"{\"scenario\": {}, \"expect\": \"maybe\"}", "'expect'"),
])
def test_corrupt_case_is_one_line_and_does_not_stop_the_run(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    good = ROOT / "corpus/regressions/deepep661-c2b.json"
    rc = cli(["replay", str(bad), str(good)])
    err = capsys.readouterr()
    assert rc == 2
    lines = [line for line in err.err.splitlines() if line.startswith("epfuzz:")]   # as every command says
    assert len(lines) == 1 and message in lines[0] and str(bad) in lines[0]
    assert "1 as expected" in err.out
    assert bad.read_bytes() == content


def test_oversized_raw_input(tmp_path, capsys):
    """A raw input over 4096 bytes replays as its harness runs it (it was refused: ops trial 1205 item 7,
    tests/cli/test_long_raw_inputs.py); a case file over 1 MiB is still refused."""
    big = tmp_path / "deepep_v2_dispatch_fuzzer" / "x"
    big.parent.mkdir()
    big.write_bytes(b"\0" * 5000)
    assert cli(["replay", str(big)]) == 0
    assert "UNCHECKED" in capsys.readouterr().out
    case = tmp_path / "big.json"
    case.write_text('{"scenario": "' + "x" * (1 << 20) + '"}')
    assert cli(["replay", str(case)]) == 2
    assert "case limit" in capsys.readouterr().err


def test_raw_input_needs_a_protocol(tmp_path, capsys):
    f = tmp_path / "x"
    f.write_bytes(b"\1\2")
    assert cli(["run", str(f)]) == 2
    assert "--protocol" in capsys.readouterr().err


def test_unknown_flag_and_command_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli(["run", "--bogus", "x"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli(["frobnicate"])
    assert e.value.code == 2


def test_missing_backend_is_explained(capsys):
    from epfuzz.backends import get_backend

    if get_backend("cuda", require=False).availability()[0]:
        pytest.skip("this host can run the cuda backend")
    rc = cli(["run", str(ROOT / "corpus/regressions/deepep661-c2b.json"), "--backend", "cuda"])
    assert rc == 2
    assert "cannot run here" in capsys.readouterr().err


def test_run_verdicts():
    assert cli(["run", str(ROOT / "corpus/regressions/deepep661-c2b.json")]) == 1
    assert cli(["run", str(ROOT / "corpus/regressions/deepep674-fixed.json")]) == 0


def test_explore_command():
    assert cli(["explore", str(ROOT / "corpus/regressions/deepep674-fixed.json")]) == 0
    assert cli(["explore", str(ROOT / "corpus/regressions/deepep661-c2b.json")]) == 1


def test_list_names_every_backend(capsys):
    assert cli(["list"]) == 0
    out = capsys.readouterr().out
    for b in ("sim: available", "verbs:", "cuda:"):
        assert b in out


def _fuzz_then_signal(run_dir: Path, sig: int, engine: str = "libfuzzer"
                      ) -> tuple[subprocess.CompletedProcess[str], str, str]:
    # --time far past the wait for a finding: the signal lands while it fuzzes, whatever the machine's load
    # (at --time 60 a loaded machine found nothing within the wait and the signal met the run's own end)
    p = subprocess.Popen([sys.executable, "-m", "epfuzz", "fuzz", "deepep_v2_dispatch", "--time", "900",
                          "--seed", "3", "--run-dir", str(run_dir), "--engine", engine],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(run_dir.glob("finding-*.json")):
        time.sleep(0.5)
    time.sleep(1)
    p.send_signal(sig)
    sent = time.monotonic()
    out, err = p.communicate(timeout=120)
    # issue 26.5: a signal ends the campaign in seconds (it took 29 s while findings were grouped)
    assert time.monotonic() - sent < 15, (time.monotonic() - sent, out[-1000:])
    return p, out, err


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_fuzz_summary_and_signal_keep_files_intact(tmp_path, sig, code):
    """A signal mid-run: exit 128+signal, the summary still prints, every written file is whole,
    no traceback anywhere, libFuzzer's final stats kept, and report.md agrees with the summary."""
    run_dir = tmp_path / "run"
    p, out, err = _fuzz_then_signal(run_dir, sig)
    assert p.returncode == code, err[-2000:]
    assert "bug(s) in" in out and f"stopped early by signal {int(sig)}" in out
    # the grouping has SIGNAL_GRACE seconds after the signal: what it grouped is listed, the rest counted
    assert "replay (minimized):" in out or "not grouped yet (stopped by a signal)" in out, out
    for case in [*run_dir.glob("finding-*.json"), *run_dir.glob("bugs/*.json")]:
        assert cli(["run", str(case)]) == 1
    assert not list(run_dir.rglob(".finding-*"))  # no temp files left behind
    log = (run_dir / "job0.log").read_text()
    assert "Traceback" not in log and "Traceback" not in err and "KeyboardInterrupt" not in log
    assert "stat::number_of_executed_units" in log
    execs = int(re.search(r"(\d+) execs", out).group(1))
    corpus = int(re.search(r"corpus (\d+)", out).group(1))
    assert cli(["report", str(run_dir), "--no-png"]) == 0
    text = (run_dir / "report.md").read_text()
    assert f"executions: {execs} " in text and f"corpus: {corpus}" in text


@pytest.mark.slow
def test_a_signal_ends_the_default_guided_engine_with_its_summary_and_whole_files(tmp_path):
    """The guided engine (the default on the sim) under SIGTERM: exit 143, the summary, every case
    whole and replayable, stats.json, and report.md agreeing with the summary."""
    run_dir = tmp_path / "run"
    p, out, err = _fuzz_then_signal(run_dir, signal.SIGTERM, engine="guided")
    assert p.returncode == 143, err[-2000:]
    assert "bug(s) in" in out and "stopped early by signal 15" in out and "Traceback" not in err
    for case in [*run_dir.glob("finding-*.json"), *run_dir.glob("bugs/*.json")]:
        assert cli(["run", str(case)]) == 1
    assert not list(run_dir.rglob(".finding-*")) and not list(run_dir.glob("job*.log"))
    execs = int(re.search(r"(\d+) execs", out).group(1))
    assert json.loads((run_dir / "stats.json").read_text())["execs"] == execs
    assert cli(["report", str(run_dir), "--no-png"]) == 0
    assert f"executions: {execs} " in (run_dir / "report.md").read_text()


@pytest.mark.slow
def test_one_bug_is_reported_once_with_a_count(tmp_path):
    """The #661 protocol: dozens of raw signatures, a handful of root causes (issue 16, point 1). Bounded in
    executions (--time is only a cap): at --time 30 how many raw findings and root causes a run had depended
    on how many executions the machine's load left it, and the counts below were those of one speed."""
    run_dir = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "deepep_v2_dispatch", "--time", "600",
                        "--max-execs", "2000", "--seed", "5", "--run-dir", str(run_dir)], capture_output=True,
                       text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 1, p.stderr[-2000:]
    raw = {json.loads(c.read_text())["signature"] for c in run_dir.glob("finding-*.json")}
    bugs = list(csv.DictReader((run_dir / "bugs.csv").open()))
    assert len(raw) >= 5 and 1 <= len(bugs) <= 4, (len(raw), [b["root_cause"] for b in bugs])
    assert sum(int(b["count"]) for b in bugs) == len(raw)
    assert all("C2b" in b["root_cause"].split("|")[3] for b in bugs)
    assert f"{len(bugs)} bug(s) by root cause, from {len(raw)} raw finding(s)" in p.stdout
    assert p.stdout.count("replay (minimized):") == len(bugs)
