"""The minimizer's result is 1-minimal: no single removal or simplification keeps the finding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from epfuzz.backends import get_backend
from epfuzz.cases.corpus import load_case
from epfuzz.cli.commands import main as cli
from epfuzz.encoding import codec
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.triage.findings import replay_command
from epfuzz.triage.minimize import is_one_minimal, minimize, reproduces

ROOT = Path(__file__).resolve().parents[2]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                 HealthCheck.too_slow])
@given(st.binary(min_size=8, max_size=64))
def test_minimized_findings_are_one_minimal(data):
    scn = codec.decode(data, "dispatch_any")
    run = simulate(scn, get_protocol(scn.protocol))
    assume(run.violation is not None)
    m = minimize(scn, get_protocol(scn.protocol))
    pred = reproduces(get_backend("sim"), get_protocol(scn.protocol), 1, 1.0, run.violation.kind)
    assert is_one_minimal(m.result, pred)


def test_clean_scenario_is_refused():
    from epfuzz.infra.errors import EpfuzzError

    with pytest.raises(EpfuzzError, match="does not reproduce"):
        minimize(Scenario(protocol="deepep_v2_dispatch_fixed"), get_protocol("deepep_v2_dispatch_fixed"))


def test_minimize_cli_writes_a_replayable_case(tmp_path, capsys):
    out = tmp_path / "min.json"
    rc = cli(["minimize", str(ROOT / "corpus/regressions/cross-qp-spec.json"), "-o", str(out)])
    assert rc == 1
    case = load_case(out)
    assert case.expect == "finding" and case.input == codec.encode(case.scenario)
    assert cli(["replay", str(out)]) == 0
    assert f"replay: {replay_command(out)}" in capsys.readouterr().out


@pytest.mark.slow
def test_libfuzzer_minimize_crash_still_works(tmp_path):
    case = json.loads((ROOT / "corpus/regressions/deepep661-c2b.json").read_text())
    crash = tmp_path / "crash"
    crash.write_bytes(bytes.fromhex(case["input"]) + b"\x07" * 40)  # a bloated reproducer
    harness = ROOT / "harnesses" / "deepep_v2_dispatch_fuzzer.py"
    p = subprocess.run([sys.executable, str(harness), "-minimize_crash=1", "-runs=300", "--preset=mlx5-pci-atomic",
                        f"-exact_artifact_path={tmp_path / 'min'}", str(crash)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert (tmp_path / "min").exists(), p.stderr[-2000:]
    # the finding cases of the runs land beside the artifact, not in the working directory
    assert list(tmp_path.glob("finding-*.json")) and not list(ROOT.glob("finding-*.json"))
    assert len((tmp_path / "min").read_bytes()) < len(crash.read_bytes())
