"""A protocol whose bug lives on one platform is fuzzed there unless told otherwise (Protocol.home_preset):
under the PCIe presets an NVLink TMA store is a WRITE, so `epfuzz fuzz tma_flag` and its harness (what
ClusterFuzzLite runs, with no --preset) were clean by construction."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from epfuzz.protocols import get_protocol

ROOT = Path(__file__).resolve().parents[2]


def test_the_home_presets_are_where_the_bad_forms_promise_a_finding():
    for name in ("tma_flag", "ro_only_strict_mr", "mixed_plane"):
        p = get_protocol(name)
        assert p.home_preset != "spec" and p.expect[p.home_preset] == "finding" and p.expect["*"] == "clean"
        assert get_protocol(f"{name}_fixed").home_preset == p.home_preset
    assert get_protocol("deepep_v2_dispatch").home_preset == "spec"


@pytest.mark.slow
def test_fuzz_runs_under_the_home_preset_by_default_and_a_named_one_when_asked(tmp_path):
    def fuzz(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "tma_flag", "--time", "600", "--max-execs",
                               "300", "--seed", "1", "--run-dir", str(tmp_path / f"r{len(extra)}"), *extra],
                              capture_output=True, text=True, cwd=tmp_path, timeout=600)
    p = fuzz()
    assert p.returncode == 1 and "tma_flag|nvlink|" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
    p = fuzz("--preset", "spec")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.mark.slow
def test_the_harness_file_runs_under_the_home_preset_as_clusterfuzzlite_starts_it(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("EPFUZZ_")}
    p = subprocess.run([sys.executable, str(ROOT / "harnesses" / "tma_flag_fuzzer.py"), "-runs=3000", "-seed=1",
                        f"-artifact_prefix={tmp_path}/"], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=600)
    assert list(tmp_path.glob("crash-*")), p.stderr[-3000:]
