"""The atheris harnesses end to end: a fixed-seed budget finds #661 and replays it; fixed stays clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from epfuzz.cases.corpus import load_case
from epfuzz.cli.commands import main as cli
from epfuzz.triage.findings import replay_command

ROOT = Path(__file__).resolve().parents[2]


def run_harness(name: str, tmp: Path, runs: int, seed: int = 1, extra: tuple[str, ...] = ()):
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    cmd = [sys.executable, str(ROOT / "harnesses" / f"{name}_fuzzer.py"), str(work),
           str(ROOT / "corpus" / f"{name}_fuzzer"), f"-artifact_prefix={tmp}/", f"-seed={seed}",
           f"-runs={runs}", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_bad_protocol_is_found_and_replays(tmp_path, capsys):
    p = run_harness("deepep_v2_dispatch", tmp_path, runs=8000)
    assert p.returncode != 0, p.stderr[-2000:]
    crashes = list(tmp_path.glob("crash-*"))
    cases = list(tmp_path.glob("finding-*.json"))
    assert crashes and cases
    assert any(f"replay: {replay_command(c)}\n" in p.stderr for c in cases)  # the same line everywhere
    case = load_case(cases[0])
    assert case.expect == "finding"
    assert cli(["run", str(cases[0])]) == 1
    assert cli(["run", str(crashes[0]), "--protocol", "deepep_v2_dispatch"]) == 1
    assert cli(["replay", str(cases[0])]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["deepep_v2_dispatch_fixed", "write_imm_signal"])
def test_fixed_protocol_stays_clean_for_the_same_budget(tmp_path, name):
    p = run_harness(name, tmp_path, runs=8000)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("finding-*.json"))


@pytest.mark.parametrize("backend, message", [("cuda", "backend cuda cannot run here"),
                                              ("verbs", "backend verbs")])
def test_unavailable_backend_fails_at_once_with_the_reason(tmp_path, backend, message):
    from epfuzz.backends import get_backend
    from epfuzz.backends.base import Where

    b = get_backend(backend, require=False)
    if b.availability()[0] and b.where() is Where.HERE:
        pytest.skip(f"{backend} can run here")
    p = run_harness("deepep_v2_dispatch", tmp_path, runs=10, extra=(f"--backend={backend}",))
    assert p.returncode == 2
    assert message in p.stderr and len(p.stderr.strip().splitlines()[-1]) < 300


def test_keep_going_writes_one_case_per_signature(tmp_path):
    p = run_harness("deepep_v2_dispatch", tmp_path, runs=8000, seed=2,
                    extra=("--keep-going", f"--findings-dir={tmp_path}"))
    assert p.returncode == 0, p.stderr[-2000:]
    cases = [load_case(c) for c in tmp_path.glob("finding-*.json")]
    assert cases
    assert len({c.signature for c in cases}) == len(cases)


def test_jobs_each_run_the_steered_mutator_and_write_their_crash(tmp_path):
    """-jobs=2 (ClusterFuzzLite's and `make fuzz JOBS=2`'s way to use the cores): each job is its own
    process with its own Steer (epfuzz.search.engines.libfuzzer), mutates with it and writes its crash."""
    work = tmp_path / "work"
    work.mkdir()
    p = subprocess.run([sys.executable, str(ROOT / "harnesses" / "deepep_v2_dispatch_fuzzer.py"), "-jobs=2",
                        "-workers=2", "-runs=5000", "-seed=1", f"-artifact_prefix={tmp_path}/", str(work)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    logs = sorted(tmp_path.glob("fuzz-*.log"))
    assert len(logs) == 2, p.stderr[-2000:]
    for log in logs:
        text = log.read_text()
        assert "Custom-" in text and "Test unit written to" in text, text[-2000:]
    assert len(list(tmp_path.glob("crash-*"))) >= 1


def test_a_packaged_fuzzer_prints_a_replay_command_that_runs(tmp_path, monkeypatch):
    """In the PyInstaller bundle OSS-Fuzz runs, sys.executable is the bundle: `BUNDLE -m epfuzz run F` went to
    libFuzzer ("unrecognized flag '-m'", cf trial 2). The line names an installed epfuzz's `run` instead."""
    case = tmp_path / "finding-x.json"
    case.write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "deepep_v2_dispatch_fuzzer.pkg"))
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert replay_command(case) == "epfuzz run finding-x.json"


def test_the_harness_library_run_as_a_module_says_it_is_no_target():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "epfuzz.continuous.harness"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and "not a target" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
