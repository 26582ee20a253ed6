"""What a new user hits (issue 16): pasteable replay lines, content-sniffed inputs, bounded reads,
expected verdicts for every replayed input, one-line errors and quiet pipes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from epfuzz.cases.corpus import read_manifest, sha1
from epfuzz.cli.args import build_parser
from epfuzz.cli.commands import main as cli
from epfuzz.encoding import codec

ROOT = Path(__file__).resolve().parents[2]
C2B = ROOT / "corpus/regressions/deepep661-c2b.json"
#: a PATH on which `epfuzz` is not found: what a user has before activating .venv
BARE_PATH = "/usr/bin:/bin"


def epfuzz(*args: str, stdin: bytes | None = None, cwd: Path = ROOT, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "epfuzz", *args], input=stdin, capture_output=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=timeout)


# ---------------------------------------------------------------- point 3: replay lines that paste


def test_printed_replay_command_pastes_without_epfuzz_on_path(tmp_path):
    out = tmp_path / "min.json"
    p = epfuzz("minimize", str(C2B), "-o", str(out), env={"PATH": BARE_PATH})
    assert p.returncode == 1, p.stderr
    line = next(x for x in p.stdout.decode().splitlines() if "replay:" in x)
    cmd = line.split("replay:", 1)[1].strip()
    assert not cmd.startswith("epfuzz ")  # not on this PATH: the command must name the install
    pasted = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "PATH": BARE_PATH}, timeout=120)
    assert pasted.returncode == 1, pasted.stderr
    assert "finding" in pasted.stdout


def test_replay_command_says_epfuzz_when_it_is_on_path(monkeypatch):
    from epfuzz.triage.findings import replay_command

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{BARE_PATH}")
    assert replay_command(C2B).startswith("epfuzz run ")
    monkeypatch.setenv("PATH", BARE_PATH)
    assert not replay_command(C2B).startswith("epfuzz run ")


# ---------------------------------------------------------------- point 4: `{`-leading raw inputs


def test_raw_input_starting_with_a_brace_is_raw(tmp_path, capsys):
    data = b'{"scenario": 1, \x07\x80garbage'
    folder = tmp_path / "deepep_v2_dispatch_fuzzer"
    folder.mkdir()
    f = folder / sha1(data)
    f.write_bytes(data)
    expect = codec.decode(data, "deepep_v2_dispatch", "spec")
    for args in (["run", str(f)], ["run", str(f), "--protocol", "deepep_v2_dispatch"]):
        rc = cli(args)
        out = capsys.readouterr()
        assert rc in (0, 1), out.err
        assert f"scenario {expect.digest()}" in out.out


def test_json_case_is_found_by_content_and_raw_flag_forces_bytes(tmp_path, capsys):
    f = tmp_path / "case-without-suffix"
    f.write_bytes(C2B.read_bytes())
    assert cli(["run", str(f)]) == 1
    assert "deepep661-c2b: finding" in capsys.readouterr().out
    g = tmp_path / "scenario-text"
    g.write_text('{"protocol": "deepep_v2_dispatch_fixed"}')
    as_bytes = codec.decode(g.read_bytes(), "deepep_v2_dispatch_fixed", "spec")
    assert as_bytes != codec.load_dict({"protocol": "deepep_v2_dispatch_fixed"})
    assert cli(["run", str(g), "--raw", "--protocol", "deepep_v2_dispatch_fixed"]) == 0
    assert f"scenario {as_bytes.digest()}" in capsys.readouterr().out


# ---------------------------------------------------------------- point 6: errors, pipes


@pytest.mark.parametrize("args", [["list"], ["safety-table"], ["run", str(C2B)], ["explain", str(C2B)]])
def test_closed_pipe_is_quiet(args):
    p = subprocess.run(f"{shlex.quote(sys.executable)} -m epfuzz {shlex.join(args)} | head -1", shell=True,
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.stdout.count("\n") == 1
    assert p.stderr == "", p.stderr


def test_deeply_nested_json_is_one_line_and_replay_goes_on(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    p = epfuzz("replay", str(deep), str(C2B))
    err = p.stderr.decode()
    assert p.returncode == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "nested too deeply" in err
    assert "1 as expected" in p.stdout.decode()
    p = epfuzz("run", str(deep))
    assert p.returncode == 2 and "Traceback" not in p.stderr.decode()


def test_unexpected_error_is_exit_3_in_one_line(monkeypatch, capsys):
    import epfuzz.cli.commands as c

    def boom(_a: object) -> int:
        raise RuntimeError("kaput\nsecond line")

    monkeypatch.setitem(c.COMMANDS, "list", boom)
    monkeypatch.delenv("EPFUZZ_DEBUG", raising=False)
    assert cli(["list"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError: kaput" in err and "Traceback" not in err
    assert cli(["--debug", "list"]) == 3
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("EPFUZZ_DEBUG", "1")
    assert cli(["list"]) == 3
    assert "Traceback" in capsys.readouterr().err


# ---------------------------------------------------------------- point 7: bounded reads, pipes


def test_device_input_is_read_only_up_to_the_limit():
    """/dev/zero is read up to the limit (1 MiB and a byte), not forever. As a raw input it decodes as its harness
    would decode it, whatever its length (ops trial 1205 item 7): zeros, the simplest scenario, clean."""
    t0 = time.monotonic()
    p = epfuzz("run", "/dev/zero", "--protocol", "deepep_v2_dispatch", timeout=60)
    assert p.returncode == 0 and b"clean" in p.stdout, p.stdout + p.stderr
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("path", ["-", "/dev/stdin"])
def test_case_from_a_pipe(path):
    p = epfuzz("run", path, stdin=C2B.read_bytes())
    assert p.returncode == 1, p.stderr
    assert b"finding" in p.stdout


def test_raw_input_from_a_pipe():
    data = (ROOT / "corpus/deepep_v2_dispatch_fixed_fuzzer").iterdir().__next__().read_bytes()
    p = epfuzz("run", "-", "--protocol", "deepep_v2_dispatch_fixed", stdin=data)
    assert p.returncode == 0, p.stderr
    assert f"scenario {codec.decode(data, 'deepep_v2_dispatch_fixed', 'spec').digest()}".encode() in p.stdout


# ---------------------------------------------------------------- point 8: checks that check


def test_empty_object_is_not_a_scenario(tmp_path, capsys):
    f = tmp_path / "empty.json"
    f.write_text("{}")
    assert cli(["replay", str(f)]) == 2
    assert "neither a case" in capsys.readouterr().err


def test_bare_scenario_with_a_finding_is_unchecked_not_passing(tmp_path, capsys):
    f = tmp_path / "bare.json"
    f.write_text(json.dumps(json.loads(C2B.read_text())["scenario"]))
    assert cli(["replay", str(f)]) == 0
    out = capsys.readouterr().out
    assert f"UNCHECKED {f}" in out and "0 as expected" in out and "1 without an expected verdict" in out
    assert cli(["replay", "--strict", str(f)]) == 1


def test_raw_input_without_a_manifest_is_unchecked(tmp_path, capsys):
    folder = tmp_path / "deepep_v2_dispatch_fuzzer"
    folder.mkdir()
    data = next((ROOT / "corpus/deepep_v2_dispatch_fuzzer").iterdir()).read_bytes()
    (folder / sha1(data)).write_bytes(data)
    assert cli(["replay", "--strict", str(folder)]) == 1
    assert "no manifest" in capsys.readouterr().out


def test_every_seed_input_has_an_expected_verdict():
    """A seed added without `make seeds` would replay unchecked: catch it here."""
    for folder in sorted((ROOT / "corpus").glob("*_fuzzer")):
        m = read_manifest(folder)
        assert m is not None, f"{folder}: no manifest; run make seeds"
        files = {sha1(p.read_bytes()) for p in folder.iterdir() if p.is_file()}
        assert files <= set(m[1]), f"{folder}: inputs without an expected verdict; run make seeds"
        assert set(m[1].values()) <= {"finding", "clean"}


def test_manifest_verdict_is_checked(tmp_path, capsys):
    folder = tmp_path / "deepep_v2_dispatch_fuzzer"
    src = ROOT / "corpus/deepep_v2_dispatch_fuzzer"
    _, verdicts = read_manifest(src)
    name, verdict = sorted(verdicts.items())[0]
    wrong = {"finding": "clean", "clean": "finding"}[verdict]
    folder.mkdir()
    (folder / name).write_bytes((src / name).read_bytes())
    assert cli(["replay", "--strict", str(folder)]) == 1  # no manifest next to the copy yet
    (tmp_path / "deepep_v2_dispatch_fuzzer.verdicts").write_text(f"preset spec\n{name} {verdict}\n")
    assert cli(["replay", "--strict", str(folder)]) == 0
    (tmp_path / "deepep_v2_dispatch_fuzzer.verdicts").write_text(f"preset spec\n{name} {wrong}\n")
    capsys.readouterr()
    assert cli(["replay", str(folder)]) == 1
    assert f"CHANGED {folder / name}: expected {wrong}" in capsys.readouterr().out


def test_replay_of_a_run_folder_replays_its_cases_and_skips_the_rest(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "corpus").mkdir(parents=True)
    (run / "finding-x.json").write_bytes(C2B.read_bytes())
    for name in ("progress.csv", "job0.log", "report.md", "bugs.csv"):
        (run / name).write_text("x\n")
    (run / "corpus" / ("a" * 40)).write_bytes(b"\1\2\3")
    (run / "artifacts").mkdir()
    (run / "artifacts" / "crash-0123abcd").write_bytes(b"\1")
    assert cli(["replay", str(run)]) == 0
    out = capsys.readouterr()
    assert "replayed 1 case(s): 1 as expected" in out.out and "skipped 6 file(s)" in out.out
    assert "error" not in out.err


# ---------------------------------------------------------------- point 11: help texts


def test_every_option_has_help():
    import argparse

    missing = []

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        for act in p._actions:
            if isinstance(act, argparse._SubParsersAction):
                for sub_name, sub in act.choices.items():
                    walk(sub, f"{name} {sub_name}")
            elif act.help is None:
                missing.append(f"{name} {act.dest}")

    walk(build_parser(), "epfuzz")
    assert not missing


def test_bound_message_names_the_bounding_field(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"protocol": "deepep_v2_dispatch", "payload": {"hidden_bytes": 16384, "epochs": 4,
                                                                          "num_tokens": 64}}))
    assert cli(["run", str(f)]) == 2
    assert "payload.epochs" in capsys.readouterr().err
    f.write_text(json.dumps({"protocol": "deepep_v2_dispatch", "topology": {"num_qps": 2, "num_channels": 2,
                                                                           "channel_qp": [0, 5]}}))
    assert cli(["run", str(f)]) == 2
    assert "bounded by topology.num_qps = 2" in capsys.readouterr().err


# ---------------------------------------------------------------- point 12: the cuda verdict line


def test_gpu_verdict_line_speaks_rounds_and_words():
    from epfuzz.model.oracle import Violation

    v = Violation("stale-accept", "dispatch_any", -1, -1, "1162 of 40000 rounds (p2p-mp-faa-nofence)",
                  bad_bytes=4 * 37184, extra={"rounds": 40000, "stale_rounds": 1162, "stale_words": 37184})
    text = v.summary()
    assert "1162 of 40000 rounds (p2p-mp-faa-nofence)" in text and "37184 32-bit words" in text
    assert "epoch -1" not in text and "tokens []" not in text and "()" not in text
