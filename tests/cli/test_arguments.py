"""Bad arguments and refused files are one line and exit 2; nothing on disk is touched (a new
user's second trial: --jobs 0 crashed, a read-only folder was "a bug in epfuzz", a reused run
folder reported an earlier run's bugs, minimize wrote into the working directory)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from epfuzz.cli.args import parse as _parse
from epfuzz.cli.commands import main as cli

ROOT = Path(__file__).resolve().parents[2]
C2B = ROOT / "corpus/regressions/deepep661-c2b.json"


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        rc = cli(list(args))
    except SystemExit as e:  # argparse's errors
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(("args", "says"), [
    (["fuzz", "deepep_v2_dispatch", "--jobs", "0"], "argument --jobs: 0 must be above 0"),
    (["fuzz", "deepep_v2_dispatch", "--time", "-5"], "argument --time: -5 must be above 0"),
    (["fuzz", "deepep_v2_dispatch", "--max-execs", "0"], "argument --max-execs: 0 must be above 0"),
    (["run", str(C2B), "--repeats", "0"], "argument --repeats: 0 must be above 0"),
    (["minimize", str(C2B), "--threshold", "2"], "argument --threshold: 2 is not a rate in (0, 1]"),
    (["minimize", str(C2B), "--max-seconds", "x"], "argument --max-seconds: 'x' is not a number"),
    (["explore", str(C2B), "--max-states", "0"], "argument --max-states: 0 must be above 0"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["fuzz", "deepep_v2_dispatch", "--protocol", "examples.seqflag:SeqFlag"], "not both"),
    (["triage", "/nonexistent/run"], "no such folder: /nonexistent/run"),
    (["triage", str(C2B)], f"cannot read {C2B}: not a folder"),
    (["-q", "-v", "list"], "argument -v/--verbose: not allowed with argument -q/--quiet"),
    # a command's own slip points to the command's help (user audit D14: it said 'see epfuzz --help')
    (["fuzz", "deepep_v2_dispatch", "--time", "x"], "(see epfuzz fuzz --help)"),
    # an option the command does not have, too (pip trial item 11: `corpus prune --protocol` said epfuzz --help)
    (["corpus", "prune", "deepep_v2_dispatch", "DIR", "--bogus"],
     "unrecognized arguments: --bogus (see epfuzz corpus prune --help)"),
    (["run", str(C2B), "--bogus"], "unrecognized arguments: --bogus (see epfuzz run --help)"),
])
def test_bad_arguments_are_one_line_and_exit_2(capsys, args, says):
    rc, _, err = run(capsys, *args)
    assert rc == 2
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_jobs_far_above_the_cores_are_refused_before_anything_starts(tmp_path, capsys, monkeypatch):
    """Pip trial item 3: --jobs 1000 on 2 cores started 1000 workers. Above 4 x the cores: one line, exit 2, no run
    folder; the bound itself is allowed (a few jobs per core is how libFuzzer's -jobs is used)."""
    from epfuzz.cli import commands

    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the host's; this process may use 2 (a container's share)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    rc, _, err = run(capsys, "fuzz", "deepep_v2_dispatch", "--jobs", "9", "--time", "1", "--max-execs", "1",
                      "--run-dir", str(tmp_path / "r"))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "--jobs 9" in err and "2 core(s)" in err and ", 8:" in err
    assert not (tmp_path / "r").exists()
    called = []

    def guided(a):  # past the check: the campaign would start here
        called.append(a.jobs)
        raise commands.InputError("stop here")

    monkeypatch.setattr(commands, "_fuzz_guided", guided)
    rc, _, err = run(capsys, "fuzz", "deepep_v2_dispatch", "--jobs", "8", "--run-dir", str(tmp_path / "r"))
    assert rc == 2 and called == [8] and "stop here" in err, err


def test_verbose_adds_the_debug_events_for_people(tmp_path):
    """User audit D4: there was -q but no -v; -v shows the debug events (here each bug's own log line, which
    for people is the table's row only)."""
    def fuzz(*extra: str) -> str:
        p = subprocess.run([sys.executable, "-m", "epfuzz", *extra, "fuzz", "flag_write_signal", "--time", "600",
                            "--max-execs", "60", "--seed", "1", "--run-dir", str(tmp_path / ("r" + "".join(extra)))],
                           capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert p.returncode == 1, p.stderr[-2000:]
        return p.stderr
    assert "fuzz.bug" not in fuzz()
    assert "fuzz.bug" in fuzz("-v") and "[debug" in fuzz("--verbose")


def test_version(capsys):
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.startswith("epfuzz ")


def test_libfuzzer_flags_after_the_options_and_vm_run_keeps_its_separator():
    a = _parse(["fuzz", "deepep_v2_dispatch", "--time", "3", "--", "-seed=1", "-runs=5"])
    assert a.harness == "deepep_v2_dispatch" and a.time == 3 and a.libfuzzer == ["-seed=1", "-runs=5"]
    assert _parse(["fuzz", "--time", "3", "deepep_v2_dispatch", "--", "-seed=1"]).libfuzzer == ["-seed=1"]
    assert _parse(["vm", "run", "--", "echo", "-x"]).rest == ["echo", "-x"]  # as before: not split off


def test_an_unwritable_output_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "file").write_text("keep")
    rc, _, err = run(capsys, "minimize", str(C2B), "-o", str(tmp_path / "file" / "out.json"))
    assert rc == 2
    assert err.startswith(f"epfuzz: -o {tmp_path / 'file' / 'out.json'}: its folder {tmp_path / 'file'} is not a "
                          "folder") and "bug in epfuzz" not in err
    assert (tmp_path / "file").read_text() == "keep"


@pytest.mark.parametrize("command", [("minimize", str(C2B), "-o"), ("explain", str(C2B), "--plot")])
def test_an_output_file_in_a_missing_folder_is_refused_and_no_folder_made(tmp_path, capsys, command):
    """Pip trial item 4: `minimize -o typo/dir/m.json` and `explain --plot /nonexistent/dir/x.png` made the
    folders. One line, exit 2, nothing created."""
    if command[0] == "explain":
        pytest.importorskip("matplotlib")
    target = tmp_path / "typo" / "dir" / "out.png"
    rc, out, err = run(capsys, *command, str(target))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert f"its folder {target.parent} does not exist" in err and out == ""
    assert list(tmp_path.iterdir()) == []


def test_minimize_writes_under_runs_not_into_the_working_directory(tmp_path):
    p = subprocess.run([sys.executable, "-m", "epfuzz", "minimize", str(C2B)], capture_output=True, text=True,
                       cwd=tmp_path, env=os.environ, timeout=300)
    assert p.returncode == 1, p.stderr
    assert [x.name for x in tmp_path.iterdir()] == ["runs"]
    written = list((tmp_path / "runs" / "minimized").glob("*.json"))
    assert len(written) == 1 and f"wrote {written[0].relative_to(tmp_path)}" in p.stdout


def test_a_used_run_folder_is_refused_and_left_as_it_was(tmp_path, capsys):
    old = tmp_path / "old"
    old.mkdir()
    (old / "finding-x.json").write_text("{}")
    rc, _, err = run(capsys, "fuzz", "deepep_v2_dispatch_fixed", "--time", "5", "--run-dir", str(old))
    assert rc == 2 and "already exists and is not empty" in err
    assert [x.name for x in old.iterdir()] == ["finding-x.json"]
    # a file where the folder would go is named as one (a user trial was told it "is not empty")
    f = tmp_path / "a-file"
    f.write_text("keep")
    rc, _, err = run(capsys, "fuzz", "deepep_v2_dispatch_fixed", "--time", "5", "--run-dir", str(f))
    assert rc == 2 and f"run folder {f} is a file, not a folder" in err and f.read_text() == "keep"


@pytest.mark.parametrize(("field", "value", "says"), [
    ("backend", "quantum", "unknown backend 'quantum'"),
    ("preset", "nopreset", "'preset' is 'nopreset' but its scenario's is"),
    ("protocol", "other", "'protocol' is 'other' but its scenario's is"),
])
def test_a_case_whose_fields_disagree_or_name_no_backend_is_refused(tmp_path, capsys, field, value, says):
    case = json.loads(C2B.read_text())
    case[field] = value
    (tmp_path / "case.json").write_text(json.dumps(case))
    rc, _, err = run(capsys, "run", str(tmp_path / "case.json"))
    assert rc == 2 and says in err, err


def test_a_case_whose_scenario_names_another_protocol_is_refused_naming_both(tmp_path, capsys):
    """Trial 0205 item 7: the scenario was loaded first, so the refusal was what the scenario's protocol could not
    take (a pinned field of write_imm_signal), naming neither the case's protocol nor the disagreement."""
    case = json.loads(C2B.read_text())
    case["scenario"]["protocol"] = "write_imm_signal"
    (tmp_path / "case.json").write_text(json.dumps(case))
    rc, _, err = run(capsys, "run", str(tmp_path / "case.json"))
    assert rc == 2, err
    assert err == (f"epfuzz: {tmp_path / 'case.json'}: 'protocol' is 'deepep_v2_dispatch' but its scenario's is "
                   "'write_imm_signal'\n"), err


def test_a_case_without_its_scenario_says_so(tmp_path, capsys):
    case = json.loads(C2B.read_text())
    del case["scenario"]
    (tmp_path / "case.json").write_text(json.dumps(case))
    rc, _, err = run(capsys, "run", str(tmp_path / "case.json"))
    assert rc == 2 and "a case with no 'scenario' (it has input, expect)" in err, err


@pytest.mark.parametrize("engine", ["guided", "libfuzzer"])
def test_max_execs_bounds_a_campaign_by_executions_whatever_the_time(tmp_path, capsys, engine):
    """--time is a cap; --max-execs is the bound a test or a benchmark can repeat on any machine."""
    rc, out, err = run(capsys, "fuzz", "deepep_v2_dispatch_fixed", "--engine", engine, "--time", "600",
                       "--max-execs", "120", "--seed", "3", "--run-dir", str(tmp_path / "r"))
    assert rc == 0, out + err
    assert ": " in out and " 120 execs " in out.splitlines()[0], out
    # the start line says which engine runs, under either (pip trial item 11: libfuzzer's had no engine=)
    start = next(line for line in err.splitlines() if "fuzz.start" in line)
    assert f"engine={engine}" in start, start
    # one number, one name: the summary's is the progress line's `features` (it said "coverage")
    assert re.search(r", features \d+, corpus ", out.splitlines()[0]) and "coverage" not in out.splitlines()[0], out


def test_quiet_after_the_command_means_what_it_means_before_it() -> None:
    """A user trial typed `epfuzz fuzz X -q` and was told "unrecognized arguments"; words after `--` stay
    the command's (libFuzzer's flags, the guest's command line)."""
    from epfuzz.cli.args import parse

    for argv in (["fuzz", "deepep_v2_dispatch", "-q"], ["fuzz", "--quiet", "deepep_v2_dispatch"],
                 ["-q", "fuzz", "deepep_v2_dispatch"]):
        a = parse(argv)
        assert a.quiet and a.cmd == "fuzz" and a.harness == "deepep_v2_dispatch", argv
    a = parse(["fuzz", "deepep_v2_dispatch", "--", "-q", "-runs=5"])
    assert not a.quiet and a.libfuzzer == ["-q", "-runs=5"]
    a = parse(["vm", "run", "--", "ls", "-q"])
    assert not a.quiet and a.rest[-1] == "-q"
    assert not parse(["fuzz", "deepep_v2_dispatch"]).quiet
