"""The bug zoo: every bad protocol is found from an empty corpus within a fixed-seed budget; every
fixed protocol runs a budget from its seed corpus with no finding. (The >= 100k-execution soak of the
fixed protocols is `make soak`, outside `make test`.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from epfuzz.protocols import REGISTRY, ZOO

ROOT = Path(__file__).resolve().parents[2]
BAD_BUDGET = 60_000
FIXED_BUDGET = 4_000


def run(name: str, tmp: Path, runs: int, corpus: bool) -> subprocess.CompletedProcess[str]:
    work = tmp / "work"
    work.mkdir()
    cmd = [sys.executable, str(ROOT / "harnesses" / f"{name}_fuzzer.py"), str(work)]
    if corpus:
        cmd.append(str(ROOT / "corpus" / f"{name}_fuzzer"))
    cmd += [f"-artifact_prefix={tmp}/", "-seed=1", f"-runs={runs}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def test_zoo_has_ten_patterns_each_with_harnesses():
    assert [z[0] for z in ZOO] == list(range(1, 11))
    for _, _, bad, fixed in ZOO:
        assert REGISTRY.items[bad].expect == "finding" and REGISTRY.items[fixed].expect == "clean"
        for name in (bad, fixed):
            assert (ROOT / "harnesses" / f"{name}_fuzzer.py").exists()
            assert REGISTRY.items[name].sources


def test_every_protocol_has_a_harness_and_seed_corpus():
    for name in (n for n in REGISTRY.items if ":" not in n):  # plug-ins loaded by other tests have none
        assert (ROOT / "harnesses" / f"{name}_fuzzer.py").exists(), name
        assert any((ROOT / "corpus" / f"{name}_fuzzer").iterdir()), name


@pytest.mark.slow
@pytest.mark.parametrize("bad", [z[2] for z in ZOO])
def test_bad_protocol_found_from_empty_corpus(tmp_path, bad):
    p = run(bad, tmp_path, BAD_BUDGET, corpus=False)
    assert list(tmp_path.glob("crash-*")), f"{bad}: no finding in {BAD_BUDGET} runs\n{p.stderr[-1500:]}"
    assert "FALSE ALARM" not in p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [z[3] for z in ZOO])
def test_fixed_protocol_has_no_finding(tmp_path, fixed):
    p = run(fixed, tmp_path, FIXED_BUDGET, corpus=True)
    assert p.returncode == 0 and not list(tmp_path.glob("crash-*")), p.stderr[-3000:]
