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
    # what the operator does with it: replay the artifact, or ClusterFuzz's download of it, without naming the
    # preset (or the protocol: the testcase's name says it); both ran clean under spec (operator trial 1205)
    assert "run --protocol tma_flag CRASH_INPUT" in p.stderr, p.stderr[-3000:]
    crash = sorted(tmp_path.glob("crash-*"))[0]
    cf = tmp_path / "clusterfuzz-testcase-minimized-tma_flag_fuzzer-5712345678"
    cf.write_bytes(crash.read_bytes())
    for args in (["--protocol", "tma_flag", str(crash)], [str(cf)]):
        r = subprocess.run([sys.executable, "-m", "epfuzz", "run", *args], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=600)
        assert r.returncode == 1 and "preset nvlink" in r.stdout, r.stdout + r.stderr


def _nvlink_input() -> bytes:
    """Raw bytes of a tma_flag scenario that is a finding under its home preset (nvlink) and clean under spec."""
    from epfuzz.encoding import codec
    from epfuzz.sim.engine import simulate

    proto = get_protocol("tma_flag")
    for n in range(1, 400):
        data = bytes([n % 256, n // 7, 1, 0, 1, 0, 0, 1, 15])
        if (simulate(codec.decode(data, "tma_flag", "nvlink"), proto).violation is not None
                and simulate(codec.decode(data, "tma_flag", "spec"), proto).violation is None):
            return data
    raise AssertionError("no tma_flag input found under nvlink")


def test_a_raw_input_decodes_under_its_protocols_home_preset_unless_one_is_named(tmp_path):
    from epfuzz.cases.replay import load_any

    data = _nvlink_input()
    crash = tmp_path / "crash-0123abcd"
    crash.write_bytes(data)
    assert load_any(crash, "tma_flag", None).scenario.preset == "nvlink"
    assert load_any(crash, "tma_flag", "spec").scenario.preset == "spec"
    assert load_any(crash, "deepep_v2_dispatch", None).scenario.preset == "spec"


def test_a_clusterfuzz_testcase_names_its_protocol(tmp_path):
    from epfuzz.cases.replay import protocol_from_path, replayable

    for name, proto in (("clusterfuzz-testcase-minimized-tma_flag_fuzzer-5712345678", "tma_flag"),
                        ("clusterfuzz-testcase-deepep_v2_dispatch_fixed_fuzzer-42", "deepep_v2_dispatch_fixed"),
                        ("clusterfuzz-testcase-minimized-no_such_protocol_fuzzer-1", None),
                        ("testcase-tma_flag_fuzzer-1", None)):
        (tmp_path / name).write_bytes(b"\x01")
        assert protocol_from_path(tmp_path / name) == proto, name
    keep, skipped = replayable([tmp_path], None)
    assert sorted(p.name for p in keep) == ["clusterfuzz-testcase-deepep_v2_dispatch_fixed_fuzzer-42",
                                            "clusterfuzz-testcase-minimized-tma_flag_fuzzer-5712345678"]


def test_every_seed_manifest_holds_verdicts_for_the_preset_its_harness_decodes_under():
    from epfuzz.cases.corpus import read_manifest

    folders = sorted(p for p in (ROOT / "corpus").glob("*_fuzzer") if p.is_dir())
    assert len(folders) > 40
    for folder in folders:
        m = read_manifest(folder)
        assert m is not None, folder
        assert m[0] == get_protocol(folder.name.removesuffix("_fuzzer")).home_preset, (folder, m[0])


def test_triage_wraps_a_crash_artifact_under_its_protocols_home_preset(tmp_path):
    from epfuzz.triage.run import triage

    (tmp_path / "crash-0123abcd").write_bytes(_nvlink_input())
    got = triage(tmp_path, "tma_flag", max_steps=2_000)
    assert len(got.grouping.bugs) == 1 and "|nvlink|" in got.grouping.bugs[0].cause


def test_a_runs_corpus_of_a_home_preset_protocol_replays_unchecked_its_crash_as_a_finding(tmp_path, capsys):
    """Under its home preset tma_flag promises a finding (`expect`), which says where its bug lives, not that each
    input shows it: a run's corpus, decoded there now, replayed as all CHANGED (expected finding, got clean); an
    input saved because it crashed is still expected to be a finding (review 1205)."""
    from epfuzz.cases.corpus import sha1
    from epfuzz.cli.commands import main

    run = tmp_path / "tma_flag_fuzzer-guided-20261205-090000"
    (run / "corpus").mkdir(parents=True)
    clean = (ROOT / "corpus" / "tma_flag_fuzzer" / "09f624ac74d46d86ce5cf6fc20eba140d0a06340").read_bytes()
    (run / "corpus" / sha1(clean)).write_bytes(clean)
    assert main(["replay", str(run / "corpus")]) == 0, capsys.readouterr().out
    assert "1 without an expected verdict" in capsys.readouterr().out
    (run / "crash-0123abcd").write_bytes(_nvlink_input())
    assert main(["replay", "-v", str(run / "crash-0123abcd")]) == 0
    assert "ok " in capsys.readouterr().out


def test_triage_says_which_crash_artifacts_it_did_not_group(tmp_path, capsys):
    """A crash-* left out of the table was left out without a word ("no findings to group", exit 0): without
    --protocol, or clean under the --preset given (review 1205)."""
    from epfuzz.triage.run import triage

    crash = tmp_path / "crash-0123abcd"
    crash.write_bytes(_nvlink_input())
    assert not triage(tmp_path, max_steps=2_000).grouping.bugs
    err = capsys.readouterr().err
    assert "1 crash-* artifact(s)" in err and "--protocol" in err, err
    assert not triage(tmp_path, "tma_flag", preset="spec", max_steps=2_000).grouping.bugs
    assert f"{crash}: clean under preset spec" in capsys.readouterr().err
