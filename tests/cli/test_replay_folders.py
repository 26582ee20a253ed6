"""Which folders `epfuzz replay` reads raw inputs from, and what it says when it cannot (user audit D10)."""

from __future__ import annotations

import hashlib
import json
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
    assert capsys.readouterr().err.strip() == ("epfuzz: no files found (3 raw input(s) skipped: no folder "
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


def _no_cuda(monkeypatch):
    """This host as one without CuPy, whatever this one has: cuda cases cannot be replayed here."""
    import epfuzz.cli.replay as replay
    from epfuzz.infra.errors import BackendUnavailable

    real = replay.get_backend

    def get_backend(name: str, require: bool = True):
        if name == "cuda" and require:
            raise BackendUnavailable("backend cuda cannot run here: CuPy is not installed")
        return real(name, require=require)

    monkeypatch.setattr(replay, "get_backend", get_backend)


def test_cases_of_a_backend_this_host_lacks_are_skipped_in_one_line_not_unreadable(tmp_path, capsys, monkeypatch):
    """`epfuzz replay corpus` said '4 unreadable', exit 2, and the CuPy line 4 times on every host without a GPU
    (cf trial 5). They are skipped with one line saying why; the replay passes unless --strict."""
    _no_cuda(monkeypatch)
    shutil.copytree(ROOT / "corpus" / "cuda", tmp_path / "cuda")
    shutil.copy(ROOT / "corpus" / "regressions" / "deepep661-c2b.json", tmp_path / "c2b.json")
    assert main(["replay", str(tmp_path)]) == 0
    got = capsys.readouterr()
    assert got.err == ""
    lines = got.out.splitlines()
    assert lines[0] == "skipped 4 case(s): backend cuda not available here: CuPy is not installed"
    assert lines[1].startswith("replayed 1 case(s): 1 as expected, 0 changed, 0 without an expected verdict, "
                               "0 unreadable") and "4 skipped (backend not available here)" in lines[1]
    assert lines[1].endswith("; PASS") and len(lines) == 2
    assert main(["replay", "--strict", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "(--strict: a case not replayed fails)" in out and out.rstrip().endswith("; FAIL (exit 1)")


def test_a_backend_asked_for_that_cannot_run_here_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """`epfuzz replay --backend cuda CASES` on a host without it printed the CuPy line once per case, counted
    each as unreadable and exited 2; then it skipped every case and ended "PASS", exit 0: a GPU job without its
    driver passed (review). The backend the user named is asked once and refused in one line, exit 2, as `run`
    refuses it; nothing is replayed."""
    _no_cuda(monkeypatch)
    import epfuzz.cli.replay as replay

    asked: list[str] = []
    lacking = replay.get_backend

    def counted(name: str, require: bool = True):
        asked.append(name)
        return lacking(name, require=require)

    monkeypatch.setattr(replay, "get_backend", counted)
    for name in ("deepep661-c2b.json", "deepep674-fixed.json", "cross-qp-spec.json"):
        shutil.copy(ROOT / "corpus" / "regressions" / name, tmp_path / name)
    for strict in ([], ["--strict"]):
        assert main(["replay", *strict, "--backend", "cuda", str(tmp_path)]) == 2
        got = capsys.readouterr()
        assert got.out == "" and got.err.count("\n") == 1, got
        assert got.err.startswith("epfuzz: backend cuda cannot run here: CuPy is not installed")
    assert asked == ["cuda", "cuda"]


def test_the_summary_says_pass_or_fail(tmp_path, capsys):
    case = ROOT / "corpus" / "regressions" / "deepep661-c2b.json"
    assert main(["replay", str(case)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("0 harness error(s); PASS")
    doc = json.loads(case.read_text())
    doc["expect"] = "clean"
    (tmp_path / "flipped.json").write_text(json.dumps(doc))
    assert main(["replay", str(tmp_path / "flipped.json")]) == 1
    assert capsys.readouterr().out.rstrip().endswith("; FAIL (exit 1)")


def test_a_case_without_expect_is_unchecked_not_unreadable(tmp_path, capsys):
    """It said `'expect' must be "finding" or "clean", got ''` and counted the case unreadable (exit 2); docs
    say an input with no expected verdict is UNCHECKED. A wrong word is still an error."""
    doc = json.loads((ROOT / "corpus" / "regressions" / "deepep661-c2b.json").read_text())
    del doc["expect"]
    (tmp_path / "noexpect.json").write_text(json.dumps(doc))
    assert main(["replay", str(tmp_path / "noexpect.json")]) == 0
    got = capsys.readouterr()
    assert got.err == "" and got.out.startswith("UNCHECKED ") and "case without 'expect'" in got.out
    assert "1 without an expected verdict, 0 unreadable" in got.out
    assert main(["replay", "--strict", str(tmp_path / "noexpect.json")]) == 1
    capsys.readouterr()
    doc["expect"] = "clen"
    (tmp_path / "noexpect.json").write_text(json.dumps(doc))
    assert main(["replay", str(tmp_path / "noexpect.json")]) == 2
    assert "'expect' must be \"finding\" or \"clean\", got 'clen'" in capsys.readouterr().err


def _seed_copy(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of a harness's seed folder and its manifest, as `make replay` reads them."""
    folder = tmp_path / SEEDS.name
    shutil.copytree(SEEDS, folder)
    manifest = tmp_path / f"{SEEDS.name}.verdicts"
    shutil.copy(SEEDS.parent / manifest.name, manifest)
    assert main(["replay", "--strict", str(folder)]) == 0
    return folder, manifest


def _problems(capsys) -> tuple[list[str], str]:
    got = capsys.readouterr()
    return [x for x in got.err.splitlines() if x.startswith("epfuzz: ")], got.out


def test_a_seed_the_manifest_lists_but_the_folder_lacks_fails_strict_replay(tmp_path, capsys):
    """Deleting a listed seed still passed `replay --strict` (cf trial 6)."""
    folder, manifest = _seed_copy(tmp_path)
    capsys.readouterr()
    gone = sorted(folder.iterdir())[0]
    gone.unlink()
    assert main(["replay", "--strict", str(folder)]) == 2
    problems, out = _problems(capsys)
    assert problems == [f"epfuzz: {manifest.resolve()}: lists {gone.name} (clean) but {gone.resolve()} is missing "
                        "(run `make seeds`)"]
    assert "1 seed manifest problem(s)" in out and out.rstrip().endswith("FAIL (exit 2)")
    assert main(["replay", str(folder)]) == 0  # without --strict: said, not failed
    assert len(_problems(capsys)[0]) == 1


def test_a_bad_verdict_word_is_a_malformed_manifest_not_a_changed_verdict(tmp_path, capsys):
    folder, manifest = _seed_copy(tmp_path)
    capsys.readouterr()
    lines = manifest.read_text().splitlines(keepends=True)
    n = next(i for i, x in enumerate(lines) if x.endswith(" clean\n"))
    lines[n] = lines[n].replace(" clean", " clen")
    manifest.write_text("".join(lines))
    for strict in ([], ["--strict"]):
        rc = main(["replay", *strict, str(folder)])
        problems, out = _problems(capsys)
        assert problems == [f"epfuzz: {manifest.resolve()}:{n + 1}: verdict 'clen' is not finding or clean"]
        assert "CHANGED" not in out and rc == (1 if strict else 2)  # --strict: its input is also UNCHECKED


def test_a_truncated_manifest_is_said_once_before_its_inputs(tmp_path, capsys):
    """Cut off, it gave every input 'not in ... (run make seeds)' and nothing else (cf trial 6)."""
    folder, manifest = _seed_copy(tmp_path)
    capsys.readouterr()
    text = manifest.read_text()
    manifest.write_text(text[:len(text) // 2])
    assert main(["replay", str(folder)]) == 2
    problems, _ = _problems(capsys)
    assert problems[0] == f"epfuzz: {manifest.resolve()}: truncated: its last line has no newline (run `make seeds`)"
    manifest.write_text(text[:120])  # cut inside the header: no preset line either
    assert main(["replay", str(folder)]) == 2
    assert f"epfuzz: {manifest.resolve()}: no 'preset NAME' line (truncated? run `make seeds`)" in _problems(capsys)[0]


def test_a_seed_not_named_by_its_sha1_fails_strict_replay(tmp_path, capsys):
    """A hand-added seed with another name was skipped as no input, silently, under --strict (cf trial 6)."""
    folder, _ = _seed_copy(tmp_path)
    capsys.readouterr()
    data = sorted(folder.iterdir())[0].read_bytes() + b"\x01"
    (folder / "my-seed").write_bytes(data)
    assert main(["replay", "--strict", str(folder)]) == 2
    problems, _ = _problems(capsys)
    assert problems == [f"epfuzz: {(folder / 'my-seed').resolve()}: a seed not named by its sha1, so never replayed "
                        f"(libFuzzer's name for it: {hashlib.sha1(data).hexdigest()}; then run `make seeds`)"]
    assert main(["replay", str(folder)]) == 0  # without --strict a folder may hold other files


def test_protocol_over_a_folder_fails_a_case_of_another_protocol_not_passes_it(tmp_path, capsys):
    """New-user trial item 2: the DeepEP regression case among a user's cases was re-run as the --protocol,
    its `"expect": "finding"` dropped, and the replay ended PASS."""
    mine = _inputs(tmp_path / "mycases", n=1)
    shutil.copy(ROOT / "corpus" / "regressions" / "deepep661-c2b.json", mine)
    assert main(["replay", str(mine), "--protocol", "deepep_v2_dispatch_fixed"]) == 2
    got = capsys.readouterr()
    assert got.out.splitlines()[-1].startswith("replayed 1 case(s): 1 as expected, 0 changed, 0 without an "
                                               "expected verdict, 1 unreadable"), got.out
    assert got.out.rstrip().endswith("FAIL (exit 2)") and "pins" not in got.err
    assert got.err.strip() == (f"epfuzz: {mine / 'deepep661-c2b.json'}: the case names protocol 'deepep_v2_dispatch', "
                               "not the --protocol 'deepep_v2_dispatch_fixed': --protocol applies only to raw fuzz "
                               "inputs and to cases of that protocol (leave it out to run the case as its own "
                               "protocol, or copy the case and change its \"protocol\" field to run it as another)")
    assert main(["replay", str(mine), "--protocol", "deepep_v2_dispatch"]) == 0
    assert "1 as expected" in capsys.readouterr().out
