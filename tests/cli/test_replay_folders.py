"""Which folders `epfuzz replay` reads raw inputs from, and what it says when it cannot (user audit D10)."""

from __future__ import annotations

import shutil
from pathlib import Path

from epfuzz.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "corpus" / "deepep_v2_dispatch_fuzzer"


def _inputs(dest: Path, n: int = 3) -> Path:
    dest.mkdir(parents=True)
    for f in sorted(p for p in SEEDS.iterdir() if len(p.name) == 40)[:n]:
        shutil.copy(f, dest / f.name)
    return dest


def test_a_run_folders_corpus_replays_under_the_protocol_its_name_gives(tmp_path, capsys):
    corpus = _inputs(tmp_path / "deepep_v2_dispatch_fuzzer-guided-20261203-091000" / "corpus")
    assert main(["replay", str(corpus)]) == 0
    assert "replayed 3 case(s)" in capsys.readouterr().out


def test_raw_inputs_under_no_protocols_folder_name_ask_for_protocol(tmp_path, capsys):
    """It said '(3 skipped: not inputs)' of a run's corpus it did not know the protocol of."""
    corpus = _inputs(tmp_path / "myrun" / "corpus")
    (corpus.parent / "progress.csv").write_text("elapsed\n")
    assert main(["replay", str(corpus.parent)]) == 2
    assert capsys.readouterr().err.strip() == ("epfuzz replay: no files found (3 raw input(s) skipped: no folder "
                                               "above them names a protocol, pass --protocol NAME; 1 skipped: not "
                                               "inputs)")
    assert main(["replay", "--protocol", "deepep_v2_dispatch", str(corpus)]) == 0


def _run_folder(tmp_path: Path) -> Path:
    """What a fresh `epfuzz fuzz` run folder holds: inputs with no manifest, one finding case, and the
    run's own records (progress.csv, stats.json, jobs/job-0.json with --jobs)."""
    run = tmp_path / "deepep_v2_dispatch_fuzzer-guided-20261204-000000"
    _inputs(run / "corpus")
    shutil.copy(ROOT / "corpus" / "regressions" / "deepep661-c2b.json", run / "finding-deepep_v2_dispatch-1.json")
    (run / "progress.csv").write_text("elapsed\n")
    (run / "stats.json").write_text('{"execs": 300, "moves": {}}')
    (run / "jobs").mkdir()
    (run / "jobs" / "job-0.json").write_text('{"execs": 150}')
    return run


def test_a_fresh_run_folder_replays_without_errors_and_counts_unchecked_inputs_in_one_line(tmp_path, capsys):
    """Its stats.json was '1 unreadable' and each corpus input an UNCHECKED line of its own (user trial)."""
    run = _run_folder(tmp_path)
    assert main(["replay", str(run)]) == 0
    got = capsys.readouterr()
    assert got.err == ""
    unchecked = [x for x in got.out.splitlines() if x.startswith("UNCHECKED")]
    assert len(unchecked) == 1 and unchecked[0].startswith("UNCHECKED 3 inputs have no expected verdict")
    assert "replayed 4 case(s): 1 as expected, 0 changed, 3 without an expected verdict, 0 unreadable" in got.out
    assert "skipped 3 file(s) that are not inputs" in got.out
    assert main(["replay", "-v", str(run)]) == 0
    assert sum(x.startswith(f"UNCHECKED {run / 'corpus'}") for x in capsys.readouterr().out.splitlines()) == 3


def test_a_corrupt_case_in_a_run_folder_is_one_line_and_exit_2(tmp_path, capsys):
    run = _run_folder(tmp_path)
    (run / "finding-deepep_v2_dispatch-2.json").write_text('{"scenario": ')
    assert main(["replay", str(run)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"epfuzz: {run / 'finding-deepep_v2_dispatch-2.json'}: ")


def test_a_stats_json_outside_a_run_folder_is_a_case_that_cannot_be_read(tmp_path, capsys):
    (tmp_path / "stats.json").write_text('{"execs": 300}')
    assert main(["replay", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"epfuzz: {tmp_path / 'stats.json'}: neither a case")
