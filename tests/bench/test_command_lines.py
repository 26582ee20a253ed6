"""The bench scripts' command lines: `--help` explains and exits 0 without measuring or writing anything, an
unknown option is a one-line error and exit 2 (bench/run.py once ran the whole five-minute benchmark for
`--help` and rewrote bench/results.json), and no script writes a result file in place (an interrupted run
would truncate the recorded figures): they go through `write_atomic`.

Only the argument handling runs here: every script's real work takes minutes (and rewrites bench/*.json).
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
#: modules of bench/ that are not commands (imported by the scripts; running them does nothing)
LIBRARIES = {"meter.py", "stats.py", "trees.py"}
#: the arguments a script requires besides the option under test, so that the parser gets as far as the
#: unknown option (argparse reports a missing required argument first)
REQUIRED = {"cuda_agreement.py": ["md"], "cuda_litmus.py": ["--out", "{tmp}/x.jsonl"],
            "guided_ab.py": ["--base", "HEAD", "--out", "{tmp}/x.json"], "search_throughput.py": ["render"],
            "throughput_ab.py": ["--base", "HEAD", "--out", "{tmp}/x.json"]}
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in LIBRARIES)
#: where the scripts write their results (and docs/repair.md, tests/data/equivalence.json.gz)
WATCHED = (BENCH, ROOT / "docs", ROOT / "tests" / "data")
#: in-place writes that are not results: a temporary folder's files
TEMPORARY = {"run.py": ["triv.write_text(TRIVIAL)"], "minimization.py": ['(t / "crash").write_bytes(nd)']}


def snapshot() -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) for d in WATCHED for p in d.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def run(script: str, args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    # from an empty folder, so that a script writing beside its working directory shows too; the timeout is
    # a backstop: the measurements take minutes, parsing the arguments a second
    return subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                          cwd=tmp, timeout=120)


def test_every_script_is_checked() -> None:
    assert "run.py" in SCRIPTS and "docs_tables.py" in SCRIPTS
    assert all((BENCH / n).exists() for n in LIBRARIES | set(REQUIRED))


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_explains_and_runs_nothing(script: str, tmp_path: Path) -> None:
    before = snapshot()
    res = run(script, ["--help"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: ") and "--help" in res.stdout
    assert "Traceback" not in res.stderr
    assert snapshot() == before, "--help wrote (or touched) a file"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_unknown_option_is_a_one_line_error(script: str, tmp_path: Path) -> None:
    before = snapshot()
    args = [a.format(tmp=tmp_path) for a in REQUIRED.get(script, [])]
    res = run(script, [*args, "--no-such-option"], tmp_path)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stdout == "" and "Traceback" not in res.stderr
    # argparse's usage, then the error on one line, naming the option
    assert re.fullmatch(rf"{re.escape(script)}: error: unrecognized arguments: --no-such-option",
                        res.stderr.strip().splitlines()[-1])
    assert snapshot() == before
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("script", ["search.py", "fixed_search.py", "depth.py"])
def test_an_unknown_protocol_is_a_one_line_error_before_any_work(script: str, tmp_path: Path) -> None:
    """search.py removed OUT.trials.jsonl (a fresh run) before a misspelt name failed in its first trial."""
    log = tmp_path / "x.trials.jsonl"
    log.write_text('{"kept": true}\n')
    before = snapshot()
    res = run(script, [*(["--out", str(tmp_path / "x")] if script == "search.py" else []), "no_such_bug"], tmp_path)
    assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr, res.stderr
    assert re.match(rf"{re.escape(script)}: error: unknown protocol 'no_such_bug'", res.stderr.splitlines()[-1])
    assert snapshot() == before and log.read_text() == '{"kept": true}\n'


@pytest.mark.parametrize("script", SCRIPTS)
def test_results_are_written_atomically(script: str) -> None:
    """No script writes a file in place (Path.write_text/write_bytes, open(..., "w")) but a temporary one."""
    lines = [x.strip() for x in (BENCH / script).read_text().splitlines()]
    in_place = [x for x in lines if re.search(r"\.write_(text|bytes)\(|\bopen\([^)]*[\"'][wx]b?[\"']", x)]
    assert in_place == TEMPORARY.get(script, [])


def test_the_equivalence_reference_is_written_atomically_as_before(tmp_path: Path) -> None:
    """bench/equivalence.py compresses in memory and renames: the same content, the same gzip header (the
    name and mtime 0 it had when written in place, so regeneration stays byte-identical), no stray files."""
    sys.path.insert(0, str(BENCH))
    try:
        import equivalence
    finally:
        sys.path.remove(str(BENCH))
    ref = equivalence.REFERENCE
    out = tmp_path / ref.name
    out.write_bytes(b"an older reference")
    equivalence.write(equivalence.load(ref), out)
    assert [p.name for p in tmp_path.iterdir()] == [ref.name]
    new, old = out.read_bytes(), ref.read_bytes()
    assert gzip.decompress(new) == gzip.decompress(old)
    assert old[3] & 8   # FNAME: the header names the file
    header = 10 + old[10:].index(b"\0") + 1   # fixed header, then the zero-terminated original name (FNAME)
    assert new[:header] == old[:header]
