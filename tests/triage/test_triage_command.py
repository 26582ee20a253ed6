"""Issue 26.5: `epfuzz triage RUN` updates the run (bugs.csv, bugs/, what `report` shows), prints each
bug's case and replay line, and says "nothing new" when it wrote nothing."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

from epfuzz.cli.commands import main as cli
from tests.triage.findings import raw_findings


def test_triage_updates_the_run_then_says_nothing_new(tmp_path, capsys):
    run = tmp_path / "run"
    paths = raw_findings(run, "flag_write_signal", 10, seed=5)
    assert cli(["triage", str(run)]) == 1
    out = capsys.readouterr().out
    rows = list(csv.DictReader((run / "bugs.csv").open()))
    assert rows and sum(int(r["count"]) for r in rows) == len(paths)
    assert f"{len(rows)} bug(s) by root cause, from {len(paths)} raw finding(s)" in out
    assert out.count("replay (minimized): ") == len(rows)
    for r in rows:
        assert r["minimized"] == "True" and f"{r['case']}\n" in out
    assert "updated" in out
    assert cli(["triage", str(run)]) == 1
    again = capsys.readouterr().out
    assert "nothing new" in again and list(csv.DictReader((run / "bugs.csv").open())) == rows
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,10,50\n")
    assert cli(["report", str(run), "--no-png"]) == 0
    assert rows[0]["root_cause"].replace("|", "\\|") in (run / "report.md").read_text()


def test_triage_groups_what_the_summary_left(tmp_path, capsys):
    """The campaign's summary was stopped early: triage finishes it and removes ungrouped.txt."""
    from epfuzz.triage.findings import group_findings, write_bug_index

    run = tmp_path / "run"
    paths = raw_findings(run, "deepep_v2_dispatch", 6, seed=6)
    cut = group_findings(paths, run / "bugs", "sim", max_steps=40, cache=False)
    assert cut.left
    write_bug_index(cut, run / "bugs.csv")
    assert (run / "ungrouped.txt").read_text().startswith("the grouping's bound of 40 steps")
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,6,50\n")
    assert cli(["report", str(run), "--no-png"]) == 0
    assert f"{len(cut.left)} raw finding(s) not grouped yet" in (run / "report.md").read_text()
    assert cli(["triage", str(run)]) == 1
    assert "updated" in capsys.readouterr().out
    assert not (run / "ungrouped.txt").exists()
    assert sum(int(r["count"]) for r in csv.DictReader((run / "bugs.csv").open())) == len(paths)


def test_triage_of_a_plugin_run_without_its_protocol_refuses_and_keeps_bugs_csv(tmp_path):
    """An author's trial: `epfuzz triage RUN` of a plug-in's run, without --protocol, said "no findings
    to group" (exit 0) and rewrote bugs.csv as a bare header. It now fails as `replay` does (one line
    naming --protocol, exit 2) and leaves the run as it was; with --protocol it groups them all."""
    from tests.hardening.util import ROOT, epfuzz, one_line_error

    spec = "examples.seqflag:SeqFlag"
    run = tmp_path / "run"
    paths = raw_findings(run, spec, 4, seed=3)
    assert paths
    (run / "bugs.csv").write_text("root_cause,count,case,minimized,raw,repeats,rate\nx|y,4,a.json,True,,1,1.000\n")
    before = {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    p = epfuzz(ROOT, "triage", str(run))
    assert p.returncode == 2 and one_line_error(p) and len(p.stderr.splitlines()) == 1, p.stderr
    assert f"--protocol {spec}" in p.stderr and f"{len(paths)} finding(s)" in p.stderr, p.stderr
    assert {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    p = epfuzz(ROOT, "triage", str(run), "--protocol", spec)
    assert p.returncode == 1, p.stdout + p.stderr
    assert sum(int(r["count"]) for r in csv.DictReader((run / "bugs.csv").open())) == len(paths)


def _crashes(folder: Path, protocol: str, count: int) -> None:
    """`count` raw libFuzzer artifacts (crash-*) that are findings of `protocol`, as a run leaves them."""
    import random

    from epfuzz.backends import get_backend
    from epfuzz.encoding import codec
    from epfuzz.protocols import get_protocol

    rng, made = random.Random(1), 0
    while made < count:
        data = rng.randbytes(96)
        if get_backend("sim").run(codec.decode(data, protocol, "spec"), get_protocol(protocol)).violation:
            (folder / f"crash-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
            made += 1


def test_triage_refuses_before_it_wraps_any_crash_artifact(tmp_path):
    """Triage wrapped the folder's crash-* artifacts (the protocol named by --protocol) as finding cases in
    the run folder, and only then refused the run's findings whose plug-in it may not load: the refusal
    (one line, exit 2) left new finding-*.json files behind. It refuses before writing anything now."""
    from tests.hardening.util import ROOT, epfuzz, one_line_error

    spec = "examples.seqflag:SeqFlag"
    run = tmp_path / "run"
    raw_findings(run, spec, 3, seed=3)
    _crashes(run, "flag_write_signal", 3)
    before = {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    for named in ([], ["--protocol", "flag_write_signal"]):
        p = epfuzz(ROOT, "triage", str(run), *named)
        assert p.returncode == 2 and one_line_error(p) and len(p.stderr.splitlines()) == 1, p.stderr
        assert f"--protocol {spec}" in p.stderr, p.stderr
        assert {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before, named


def test_triage_help_says_a_plugin_run_needs_protocol():
    """`triage --help` described --protocol only for raw crash-* artifacts: a plug-in's run needs it too."""
    from epfuzz.cli.args import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    helps = {a.dest: a.help or "" for a in sub.choices["triage"]._actions}  # type: ignore[attr-defined]
    assert "plug-in" in helps["protocol"] and "crash-*" in helps["protocol"], helps["protocol"]


def test_the_triage_command_printed_for_a_plugins_ungrouped_findings_names_its_protocol(tmp_path):
    """The summary's and report.md's "epfuzz triage RUN groups them" failed when pasted for a plug-in's
    run (triage needs --protocol to import it): both lines now carry it."""
    from epfuzz.triage.findings import bug_table, group_findings, write_bug_index

    spec = "examples.seqflag:SeqFlag"
    run = tmp_path / "run"
    paths = raw_findings(run, spec, 6, seed=3)
    cut = group_findings(paths, run / "bugs", "sim", max_steps=20, cache=False)
    assert cut.left
    assert bug_table(cut, run_dir=run)[-1].endswith(f"--protocol {spec} groups them")
    write_bug_index(cut, run / "bugs.csv")
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,6,50\n")
    assert cli(["report", str(run), "--no-png"]) == 0
    assert f"--protocol {spec}` groups them" in (run / "report.md").read_text()


def test_report_of_a_run_whose_bugs_csv_groups_none_of_its_findings_says_so(tmp_path):
    """An author's trial: after triage emptied bugs.csv, report said "Findings by root cause: none" for a
    run with 18 findings. A bugs.csv of no rows beside raw findings is said, with the command that groups."""
    spec = "examples.seqflag:SeqFlag"
    run = tmp_path / "run"
    paths = raw_findings(run, spec, 3, seed=3)
    (run / "bugs.csv").write_text("root_cause,count,case,minimized,raw,repeats,rate\n")
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,3,50\n")
    assert cli(["report", str(run), "--no-png"]) == 0
    text = (run / "report.md").read_text()
    assert f"but {len(paths)} raw finding(s) (finding-*.json) are in the folder and bugs.csv groups none" in text
    assert f"--protocol {spec}` groups them" in text


def _pasted(line: str, spec: str) -> list[str]:
    """The arguments a shell gives `epfuzz triage` for the command at the end of `line` (`... : CMD groups
    them`, in backticks in report.md)."""
    import shlex

    cmd = line.rsplit(": ", 1)[1].removesuffix(" groups them").strip("`")
    args = shlex.split(cmd)
    return args[args.index("triage") + 1:]


def test_every_printed_triage_command_pastes_for_a_run_folder_with_a_space(tmp_path, monkeypatch):
    """The summary's, report.md's "not grouped yet" and report.md's "bugs.csv groups none" lines each
    built their own `epfuzz triage RUN`; report.md's left the run folder unquoted, so a folder with a space
    pasted as two arguments. One helper (findings.triage_command) builds all three, quoted."""
    import os
    import subprocess

    from epfuzz.triage.findings import bug_table, group_findings, write_bug_index
    from tests.hardening.util import ROOT

    monkeypatch.chdir(tmp_path)
    spec = "examples.seqflag:SeqFlag"
    run = tmp_path / "my runs" / "run 1"
    paths = raw_findings(run, spec, 6, seed=3)
    cut = group_findings(paths, run / "bugs", "sim", max_steps=20, cache=False)
    assert cut.left
    want = ["my runs/run 1", "--protocol", spec]
    summary = bug_table(cut, run_dir=run)[-1]
    assert _pasted(summary, spec) == want
    write_bug_index(cut, run / "bugs.csv")
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,6,50\n")
    assert cli(["report", "my runs/run 1", "--no-png"]) == 0
    (left,) = [x for x in (run / "report.md").read_text().splitlines() if "not grouped yet" in x]
    assert _pasted(left, spec) == want
    (run / "ungrouped.txt").unlink()
    (run / "bugs.csv").write_text("root_cause,count,case,minimized,raw,repeats,rate\n")
    assert cli(["report", "my runs/run 1", "--no-png"]) == 0
    (none,) = [x for x in (run / "report.md").read_text().splitlines() if "bugs.csv groups none" in x]
    assert _pasted(none, spec) == want
    from epfuzz.triage.findings import triage_command

    assert triage_command(run, spec) in summary
    # and the summary's line, pasted into a shell as printed, groups them all (the plug-in found where its
    # author's project would have it)
    cmd = summary.rsplit(": ", 1)[1].removesuffix(" groups them")
    p = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 1, p.stdout + p.stderr
    assert sum(int(r["count"]) for r in csv.DictReader((run / "bugs.csv").open())) == len(paths)


def _report(run: Path) -> str:
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,3,50\n")
    assert cli(["report", str(run), "--no-png"]) == 0
    return (run / "report.md").read_text()


def test_report_counts_the_findings_an_empty_bugs_csv_leaves_whatever_ungrouped_txt_is_there(tmp_path):
    """The "bugs.csv groups none" line was keyed on whether ungrouped.txt exists: a stale one (naming
    findings no longer there) hid every raw finding. It counts the findings ungrouped.txt does not list."""
    spec = "examples.seqflag:SeqFlag"
    run = tmp_path / "run"
    paths = raw_findings(run, spec, 3, seed=3)
    (run / "bugs.csv").write_text("root_cause,count,case,minimized,raw,repeats,rate\n")
    (run / "ungrouped.txt").write_text("stopped by a signal\nfinding-gone-000000000000.json\n")
    text = _report(run)
    assert f"but {len(paths)} raw finding(s) (finding-*.json) are in the folder and bugs.csv groups none" in text
    assert f"--protocol {spec}` groups them" in text
    (run / "ungrouped.txt").write_text("stopped by a signal\n" + "".join(f"{p.name}\n" for p in paths[1:]))
    text = _report(run)  # ungrouped.txt lists two of the three: the third is the one said
    assert "but 1 raw finding(s) (finding-*.json) are in the folder and bugs.csv groups none" in text, text
    assert "2 raw finding(s) not grouped yet (stopped by a signal)" in text
    (run / "ungrouped.txt").write_text("stopped by a signal\n" + "".join(f"{p.name}\n" for p in paths))
    assert "bugs.csv groups none" not in _report(run)  # all listed: the ungrouped line says them


def test_report_of_raw_findings_and_no_bugs_csv_does_not_blame_a_bugs_csv(tmp_path):
    """A run folder with no bugs.csv (from before it, or never grouped) whose findings do not load here
    (a plug-in not named) was said to have a "bugs.csv [that] groups none of them"."""
    run = tmp_path / "run"
    paths = raw_findings(run, "flag_write_signal", 2, seed=3)
    for p in paths:  # as a plug-in's findings, whose module is not here
        doc = json.loads(p.read_text())
        doc["scenario"]["protocol"] = "absent_module:Flag"
        p.write_text(json.dumps(doc))
    text = _report(run)
    assert "bugs.csv groups none" not in text, text
    assert f"but {len(paths)} raw finding(s) (finding-*.json) are in the folder and there is no bugs.csv" in text
    assert "--protocol absent_module:Flag` groups them" in text


def test_triage_of_a_folder_with_no_findings_and_no_run_refuses_as_report_does(tmp_path, capsys):
    """Trial 0205 item 5: `triage emptyd` said "no findings to group", wrote emptyd/bugs.csv and exited 0, where
    `report emptyd` refused it as no run folder. Both refuse it now, and nothing is written; a run folder with no
    finding is still triaged (exit 0)."""
    empty = tmp_path / "emptyd"
    empty.mkdir()
    for verb in ("triage", "report"):
        assert cli([verb, str(empty), *(["--no-png"] if verb == "report" else [])]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"epfuzz: {empty}: no ") and err.rstrip().endswith("(not an epfuzz fuzz run folder?)")
        assert list(empty.iterdir()) == [], verb
    (empty / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1,10,10,5,3,0,50\n")
    assert cli(["triage", str(empty)]) == 0
    assert f"no findings to group in {empty}" in capsys.readouterr().out
    assert cli(["report", str(empty), "--no-png"]) == 0
