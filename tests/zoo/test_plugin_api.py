"""The plug-in API: a protocol from a user module fuzzes without writing atheris code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from epfuzz.cli.commands import main as cli
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _cwd(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_plugin_loads_by_module_and_attr():
    p = get_protocol("examples.seqflag:SeqFlag")
    assert p.expect == "finding"
    s = codec.load_dict({"protocol": "examples.seqflag:SeqFlag",
                            "knobs": {"nic_relaxed_ordering": True, "reorder_window": 8}})
    assert explore(s, get_protocol(s.protocol)).violation is not None
    safe = s.replace(protocol="examples.seqflag:SeqFlagAtomic", knobs=s.knobs.__class__(
        nic_relaxed_ordering=True, reorder_window=8, atomic_mode=4))
    assert explore(safe, get_protocol(safe.protocol)).violation is None
    assert simulate(safe.with_path("payload.epochs", 3), get_protocol(safe.protocol)).violation is None


def test_unknown_plugin_is_a_one_line_error(capsys):
    assert cli(["fuzz", "--protocol", "nosuchmod:X", "--time", "1"]) == 2
    assert "cannot load protocol" in capsys.readouterr().err


@pytest.mark.slow
def test_fuzz_a_plugin_protocol(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "--protocol", "examples.seqflag:SeqFlag",
                        "--time", "600", "--max-execs", "1000", "--seed", "1", "--run-dir", str(run_dir)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 1, p.stderr[-2000:]
    cases = list(run_dir.glob("finding-*.json"))
    assert cases and ":" not in cases[0].name
    assert cli(["run", str(cases[0])]) == 1
