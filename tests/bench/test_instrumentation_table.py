"""The instrumentation table's children instrument what they name (bench/throughput.py).

With the pure path's finder installed inside atheris' block, the compiled set's sources were loaded
uninstrumented and the table read slowdowns below 1: these fail on that tree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402

pytest.importorskip("atheris")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "EPFUZZ_PURE": "1"}, cwd=ROOT)


@pytest.mark.parametrize("group", ["emulator", "oracle", "decoder", "protocols"])
def test_child_instruments_its_group(group: str) -> None:
    body = "from epfuzz.sim import engine; print('ok', engine.__file__)\n"
    res = _run(throughput.instrumented_child(group, body))
    assert res.returncode == 0, res.stderr[-500:]
    assert "ok" in res.stdout and res.stdout.strip().endswith(".py")  # the pure path's sources


def test_uninstrumented_modules_fail_the_check() -> None:
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
            "import epfuzz.sim.engine, throughput\n"
            "throughput.check_instrumented(['epfuzz.sim'])\n")
    res = _run(code)
    assert res.returncode != 0
    assert "atheris instrumented no module of epfuzz.sim" in res.stderr
