"""Issue 28's output points outside the campaign engines: log lines for people on any stream, case
files readable like the rest, argument slips as usage errors, and `list` telling which emulator runs."""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from epfuzz.cases.corpus import write_atomic
from epfuzz.infra import log as elog

ROOT = Path(__file__).resolve().parents[2]
C2B = ROOT / "corpus/regressions/deepep661-c2b.json"


def epfuzz(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epfuzz", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=120)


def _logged(capsys: pytest.CaptureFixture[str], **configure: object) -> str:
    elog.configure(**configure)  # type: ignore[arg-type]
    try:
        elog.get_logger(harness="h").info("fuzz.finding", signature="p|spec|stale-accept|C2b")
    finally:
        elog.configure()
    return capsys.readouterr().err


def test_log_lines_are_for_people_off_a_terminal_and_json_only_when_asked(capsys):
    """Off a terminal (CI, `| tee`, pytest's capture) the lines used to turn into JSON."""
    line = _logged(capsys)
    assert "fuzz.finding" in line and not line.lstrip().startswith("{") and "\x1b[" not in line
    doc = json.loads(_logged(capsys, json_lines=True))
    assert doc["event"] == "fuzz.finding" and doc["harness"] == "h"


def test_log_format_json_is_an_option_and_a_bad_format_a_usage_error():
    assert epfuzz("--log-format", "json", "list").returncode == 0
    p = epfuzz("--log-format", "xml", "list")
    assert p.returncode == 2 and "invalid choice: 'xml'" in p.stderr


def test_case_files_get_the_mode_of_any_other_file_under_the_umask(tmp_path):
    """mkstemp's 0600 made every case unreadable to the other users of a shared run folder."""
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a.json", b"{}")
        (tmp_path / "b.txt").write_text("x")
        assert epfuzz("minimize", str(C2B), "-o", str(tmp_path / "c.json")).returncode == 1
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"a.json": 0o644, "b.txt": 0o644, "c.json": 0o644}


def test_corpus_prune_refuses_an_extra_folder_and_merge_needs_a_source(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "seed").write_bytes(b"\x00")
    p = epfuzz("corpus", "prune", "deepep_v2_dispatch", str(tmp_path / "c"), "extra")
    assert p.returncode == 2 and "unrecognized arguments: extra" in p.stderr, p.stderr
    p = epfuzz("corpus", "merge", "deepep_v2_dispatch", str(tmp_path / "c"))
    assert p.returncode == 2 and "arguments are required: sources" in p.stderr, p.stderr
    assert [x.name for x in (tmp_path / "c").iterdir()] == ["seed"]  # nothing on disk touched


def test_list_names_the_emulator_this_process_runs():
    from epfuzz.core import native

    sim = next(x for x in epfuzz("list").stdout.splitlines() if x.strip().startswith("sim:"))
    assert ("runs compiled (mypyc)" if native.running() == "compiled" else "runs pure Python") in sim
    pure = next(x for x in epfuzz("list", env={"EPFUZZ_PURE": "1"}).stdout.splitlines()
                if x.strip().startswith("sim:"))
    assert "runs pure Python" in pure and "epfuzz.core.corebuild" in pure


def test_a_missing_plot_library_names_its_extra(monkeypatch, tmp_path, capsys):
    """Without matplotlib, explain --plot and report ended "unexpected error (a bug in epfuzz)", exit 3."""
    import importlib.util

    from epfuzz.cli.commands import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["explain", str(C2B), "--plot", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err == f"epfuzz: explain --plot needs matplotlib: {sys.executable} -m pip install " \
                                      "'epfuzz[plot]'\n"
    assert main(["report", str(tmp_path)]) == 2
    assert "-m pip install 'epfuzz[plot]' (or --no-png" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


#: the bounds of a run. Off a terminal the first progress line comes a second into the run, so a run asserted
#: to show one must last longer, on the fastest machine too: it is bounded in wall time. The guided engine's
#: loop runs its --time out after the seeds and meets flag_write_signal's bug within its first executions.
#: A libFuzzer job's -max_total_time also counts its own start-up (Python, atheris, epfuzz's imports: seconds
#: on a loaded machine), so it gets 10 s, which 1,500 executions cut short where they are fast (the harness ran
#: 674 exec/s on the 16-core host: over 2 s); the bug comes in its first executions (-seed=1).
GUIDED = ("--time", "3")
LIBFUZZER = ("--engine", "libfuzzer", "--time", "10", "--max-execs", "1500")


def _fuzz_piped(tmp_path: Path, *extra: str, after: tuple[str, ...] = GUIDED) -> subprocess.CompletedProcess[str]:
    """`epfuzz fuzz` with both streams piped (CI, `| cat`), the default engine, a bounded run; `extra` are
    epfuzz's own options, `after` the fuzz command's (its bounds among them)."""
    return subprocess.run([sys.executable, "-m", "epfuzz", *extra, "fuzz", "flag_write_signal", "--seed", "1",
                           "--run-dir", str(tmp_path / "run"), *after], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)


@pytest.mark.slow
def test_off_a_terminal_a_fuzz_run_shows_a_progress_line_each_raw_finding_once_and_each_bug_once(tmp_path):
    """Issue 28.3: off a terminal no JSON, a progress line, one line per raw finding (it was a 4-line
    block with the scenario's JSON), and each bug once: its table row (it was also a log line)."""
    p = _fuzz_piped(tmp_path)
    assert p.returncode == 1, p.stderr[-2000:]
    lines = (p.stdout + p.stderr).splitlines()
    assert not [x for x in lines if x.lstrip().startswith("{")], "JSON in the output for people"
    assert any(x.startswith("progress: [") and " execs " in x for x in p.stderr.splitlines()), p.stderr[-2000:]
    raw = [x for x in p.stderr.splitlines() if x.startswith("=== epfuzz finding: ")]
    cases = sorted((tmp_path / "run").glob("finding-*.json"))
    assert len(raw) == len(cases) > 0 and all("; replay: " in x for x in raw)
    assert "scenario:" not in p.stderr and "fuzz.bug" not in p.stderr
    causes = [b["root_cause"] for b in csv.DictReader((tmp_path / "run" / "bugs.csv").open())]
    assert causes and all((p.stdout + p.stderr).count(c) == 1 for c in causes), causes


@pytest.mark.slow
def test_quiet_leaves_the_summary_and_the_table_and_json_logs_each_bug(tmp_path):
    p = _fuzz_piped(tmp_path, "-q")
    assert p.returncode == 1 and "bug(s) by root cause" in p.stdout, p.stderr[-2000:]
    assert "=== epfuzz finding" not in p.stderr and "progress:" not in p.stderr and "fuzz.start" not in p.stderr
    shutil.rmtree(tmp_path / "run")
    p = _fuzz_piped(tmp_path, "--log-format", "json")
    bugs = [json.loads(x) for x in p.stderr.splitlines() if x.startswith("{") and '"fuzz.bug"' in x]
    assert bugs and all(b["replay"] for b in bugs)   # a program reading the log gets every bug there
    assert "progress:" not in p.stderr


@pytest.mark.slow
def test_jobs_show_one_progress_line_and_each_raw_finding_once(tmp_path):
    """User audit D1: with --jobs 2 the guided engine showed no progress line and no raw finding (they went to
    the jobs' logs), on a terminal or off it."""
    p = _fuzz_piped(tmp_path, after=(*GUIDED, "--jobs", "2"))
    assert p.returncode == 1, p.stderr[-2000:]
    err = p.stderr.splitlines()
    assert any(x.startswith("progress: [") for x in err), p.stderr[-2000:]
    raw = [x for x in err if x.startswith("=== epfuzz finding: ")]
    cases = sorted((tmp_path / "run").glob("finding-*.json"))
    assert len(raw) == len(set(raw)) == len(cases) > 0


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["guided", "libfuzzer"])
def test_a_json_log_is_json_lines_only_with_each_finding_and_progress_as_events(tmp_path, engine):
    """User audit D3: under --log-format json the raw findings were plain text lines between the JSON, and the
    guided engine logged no progress event."""
    p = _fuzz_piped(tmp_path, "--log-format", "json", after=LIBFUZZER if engine == "libfuzzer" else GUIDED)
    assert p.returncode == 1, p.stderr[-2000:]
    events = [json.loads(x) for x in p.stderr.splitlines()]          # every line is JSON
    kinds = [e["event"] for e in events]
    assert "fuzz.progress" in kinds and "fuzz.summary" in kinds
    found = [e for e in events if e["event"] == "fuzz.finding"]
    assert len(found) == len(list((tmp_path / "run").glob("finding-*.json"))) > 0
    assert all(e["replay"].endswith(".json") and e["summary"] for e in found)
    # each fuzz event names the campaign as fuzz.start does (fuzz.finding had no harness, backend nor preset:
    # trial 0205 item 4)
    start = next(e for e in events if e["event"] == "fuzz.start")
    fields = {k: start[k] for k in ("harness", "backend", "preset", "engine")}
    assert fields["harness"] == "flag_write_signal_fuzzer" and fields["engine"] == engine, start
    for e in events:
        if e["event"] in ("fuzz.finding", "fuzz.progress", "fuzz.summary"):
            assert {k: e.get(k) for k in fields} == fields, e


#: the fuzz.summary event's keys, whichever engine ran (one schema: docs/usage.md)
SUMMARY_KEYS = {"event", "level", "timestamp", "harness", "backend", "preset", "engine", "execs", "exec_per_s",
                "corpus", "features", "harness_errors", "jobs", "findings", "bugs", "run_dir", "stop", "signal"}


@pytest.mark.parametrize("jobs", ["1", "2", "libfuzzer"])
def test_a_json_log_says_a_run_that_max_execs_ended_stopped_at_its_execs(tmp_path, jobs):
    """Trial 0205 item 4: `fuzz --max-execs 500` ended after 1 s of its 60 and fuzz.summary said "stop": "time";
    every fuzz.finding event named the campaign's harness, backend and preset as its other events do. The
    summary event has the same keys whichever engine ran: the guided one said `features` and no
    `harness_errors`, libFuzzer `cov` and no `features`, `--jobs N` alone `jobs` (ops trial 1205 item 5)."""
    engine = ("--engine", "libfuzzer", "--time", "600") if jobs == "libfuzzer" else ("--jobs", jobs, "--time", "600")
    p = _fuzz_piped(tmp_path, "--log-format", "json", after=(*engine, "--max-execs", "40"))
    assert p.returncode == 1, p.stderr[-2000:]
    events = [json.loads(x) for x in p.stderr.splitlines()]
    end = next(e for e in events if e["event"] == "fuzz.summary")
    assert end["stop"] == "execs" and end["execs"] >= 40 and end["signal"] is None, end
    assert set(end) == SUMMARY_KEYS, end
    assert end["jobs"] == (2 if jobs == "2" else 1) and end["features"] > 0 and end["harness_errors"] == 0, end
    found = [e for e in events if e["event"] == "fuzz.finding"]
    assert found and all(e["harness"] == "flag_write_signal_fuzzer" and e["backend"] == "sim"
                         and e["preset"] == end["preset"] for e in found), found[:1]


def test_the_stop_word_of_an_execution_bound():
    from epfuzz.campaign.common import exec_bound
    from epfuzz.campaign.libfuzzer import _runs

    assert exec_bound(None, [500]) == "time"
    assert exec_bound(40, [40, 52]) == "execs"      # every job reached it (libFuzzer's -runs is per job)
    assert exec_bound(40, [40, 12]) == "time"       # one job's --time ran out first
    assert exec_bound(40, []) == "time"
    assert _runs(["-runs=10", "-max_len=9", "-runs=7"]) == 7 and _runs(["-runs=x"]) is None


@pytest.mark.slow
def test_the_libfuzzer_engine_shows_the_same_progress_line_and_its_raw_findings(tmp_path):
    """User audit D5: off a terminal the libFuzzer engine's progress was a key=value log line, and its raw
    findings stayed in the jobs' logs."""
    p = _fuzz_piped(tmp_path, after=LIBFUZZER)
    assert p.returncode == 1, p.stderr[-2000:]
    err = p.stderr.splitlines()
    assert any(x.startswith("progress: [") and " features " in x for x in err), p.stderr[-2000:]
    assert "fuzz.progress" not in p.stderr and "fuzz.summary" not in p.stderr
    raw = [x for x in err if x.startswith("=== epfuzz finding: ")]
    assert len(raw) == len(list((tmp_path / "run").glob("finding-*.json"))) > 0


def test_under_a_json_log_error_lines_are_json_too(tmp_path):
    """`--log-format json fuzz nosuch` and a bad case file printed plain `epfuzz: ...` lines; the docs say every
    stderr line is JSON (cf trial 4)."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"scenario": 5')
    for args in (("fuzz", "nosuch"), ("run", str(bad))):
        p = epfuzz("--log-format", "json", *args)
        assert p.returncode == 2
        events = [json.loads(x) for x in p.stderr.splitlines()]
        assert len(events) == 1 and events[0]["event"] == "error" and events[0]["level"] == "error", p.stderr
    assert events[0]["message"].startswith(f"{bad}: not valid JSON")
    p = epfuzz("fuzz", "nosuch")  # for people it stays a line
    assert p.stderr.startswith("epfuzz: unknown harness 'nosuch'")


def test_the_json_summary_event_says_why_the_run_stopped_where_it_is_and_its_bugs(tmp_path, capsys):
    """The text summary said "stopped early by signal 2"; fuzz.summary had no stop reason, run folder or bug
    count (cf trial 4)."""
    from epfuzz.campaign.common import Summary, log_end
    from epfuzz.triage.findings import Bug

    case = tmp_path / "bug.json"
    shutil.copy(C2B, case)
    bug = Bug("deepep_v2_dispatch|C2b", case, "overtake", True, [case])
    summary = Summary("deepep_v2_dispatch_fuzzer", tmp_path, 10.0, 100, 5, 7, 0,
                      [("sig", case, "overtake")], [bug], interrupted=2)
    elog.configure(json_lines=True)
    try:
        log_end(elog.get_logger(), summary)
    finally:
        elog.configure()
    events = [json.loads(x) for x in capsys.readouterr().err.splitlines()]
    end = next(e for e in events if e["event"] == "fuzz.summary")
    assert (end["stop"], end["signal"], end["run_dir"], end["bugs"], end["findings"]) == \
        ("signal", 2, str(tmp_path), 1, 1)
    summary.interrupted = 0
    elog.configure(json_lines=True)
    try:
        log_end(elog.get_logger(), summary)
    finally:
        elog.configure()
    end = [json.loads(x) for x in capsys.readouterr().err.splitlines()][-1]
    assert end["stop"] == "time" and end["signal"] is None


def test_the_json_summary_names_a_harness_error_as_the_stop(tmp_path):
    """A guided campaign stops at a plug-in's first exception (exit 3): its summary event said `stop: time`
    (review); the run's budget did not end it."""
    from epfuzz.campaign.common import Summary, stop_reason

    summary = Summary("x_fuzzer", tmp_path, 0.0, 0, 0, 0, 1, [], [], error="ValueError: boom")
    assert stop_reason(summary) == "harness_error"
    summary.interrupted = 2
    assert stop_reason(summary) == "signal"


def test_json_stderr_loses_no_line_when_threads_write_at_once():
    """The JSON stderr wrapper keeps the pending part of a line between writes; two threads writing through
    it (libFuzzer's relays, the logger) could drop or repeat lines (review). Each line comes out once."""
    import io
    import threading

    from epfuzz.infra.log import _JsonStderr

    inner = io.StringIO()
    wrapped = _JsonStderr(inner)

    def writer(k: int) -> None:
        for i in range(2000):
            wrapped.write(f"w{k}-")
            wrapped.write(f"{i}\n")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can: without the lock it fails
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    wrapped.close_line()
    lines = inner.getvalue().splitlines()
    assert len(lines) == 8000 and all(json.loads(x)["event"] == "error" for x in lines)


def test_under_a_json_log_usage_errors_are_json_too():
    """argparse's own errors (an unknown option, a bad value) come before the options configure logging: they
    were plain lines under --log-format json (fixer's leftover). Each is one error event; for people a line."""
    for args in (("--log-format", "json", "fuzz", "x", "--nosuch"), ("--log-format=json", "fuzz", "x", "--jobs", "0"),
                 ("--log-json", "replay", "--strict-nosuch")):
        p = epfuzz(*args)
        assert p.returncode == 2, p.stderr
        events = [json.loads(x) for x in p.stderr.splitlines()]
        assert len(events) == 1 and events[0]["event"] == "error", p.stderr
    p = epfuzz("fuzz", "x", "--nosuch")
    assert p.returncode == 2 and p.stderr.startswith("epfuzz: ") and not p.stderr.startswith("{")


def test_a_json_log_has_each_changed_verdict_and_the_replay_summary_as_events(tmp_path):
    """Trial 0205 item 4: `--log-format json replay` wrote its CHANGED lines and its summary as text on stdout
    alone: a CI job reading the log had no event for either. The text stays on stdout for people."""
    shutil.copy(C2B, tmp_path / "ok.json")
    case = json.loads(C2B.read_text())
    case["expect"] = "clean"
    (tmp_path / "changed.json").write_text(json.dumps(case))
    p = epfuzz("--log-format", "json", "replay", str(tmp_path))
    assert p.returncode == 1, p.stdout + p.stderr
    events = [json.loads(x) for x in p.stderr.splitlines()]          # every line is JSON
    changed = [e for e in events if e["event"] == "replay.changed"]
    assert [(e["path"], e["expected"], e["got"]) for e in changed] == [(str(tmp_path / "changed.json"), "clean",
                                                                         "finding")]
    assert changed[0]["line"] in p.stdout.splitlines() and changed[0]["level"] == "warning"
    end = events[-1]
    assert end["event"] == "replay.summary", events
    assert (end["replayed"], end["as_expected"], end["changed"], end["unreadable"], end["passed"], end["exit"]) == \
        (2, 1, 1, 0, False, 1)
    assert "FAIL (exit 1)" in p.stdout
    p = epfuzz("replay", str(tmp_path))  # for people: the lines alone
    assert "replay.changed" not in p.stderr + p.stdout and "replay.summary" not in p.stderr + p.stdout


def test_a_json_log_of_a_replay_that_found_no_files_ends_in_its_replay_summary(tmp_path):
    """Ops trial 1205 item 5: `replay EMPTYDIR` logged an error event (whose message kept an `epfuzz replay:`
    prefix) and no replay.summary, where a missing path logged both: a CI job waiting for the summary got
    none. Now zero counts and the exit status (2, as documented), after the one error."""
    (tmp_path / "empty").mkdir()
    p = epfuzz("--log-format", "json", "replay", str(tmp_path / "empty"))
    assert p.returncode == 2, p.stdout + p.stderr
    events = [json.loads(x) for x in p.stderr.splitlines()]
    assert [e["event"] for e in events] == ["error", "replay.summary"], events
    assert events[0]["message"] == "no files found", events
    end = events[-1]
    assert (end["replayed"], end["as_expected"], end["changed"], end["unreadable"], end["not_inputs"],
            end["passed"], end["exit"]) == (0, 0, 0, 0, 0, False, 2), end
    p = epfuzz("replay", str(tmp_path / "empty"))  # for people: the line alone
    assert p.returncode == 2 and p.stderr == "epfuzz: no files found\n" and not p.stdout, p.stderr
