"""Boot the soft-RoCE guest once and run tests/guest inside it (the verbs backend on real rxe).

Marked `guest`: `make test` runs them after the parallel suite, alone, because the guest's
timing tests (a throttled QP must delay data past the receiver's next look) fail when the
emulated CPUs are starved by other tests."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from epfuzz.encoding import codec
from epfuzz.guest import vm

TOOLS = ("qemu-system-x86_64", "mmdebstrap", "cpio", "apt-get")
missing = [t for t in TOOLS if shutil.which(t) is None]


@pytest.mark.slow
@pytest.mark.guest
@pytest.mark.skipif(bool(missing), reason=f"the soft-RoCE guest needs {', '.join(missing)} (make vm-deps)")
def test_verbs_suite_in_the_guest(tmp_path):
    rc, lines = vm.run("python3 -m pytest -q -p no:cacheprovider -s tests/guest", timeout=1200, stream=False,
                       out_dir=tmp_path)
    tail = "\n".join(lines[-40:])
    assert rc == 0, tail
    assert any(" passed" in x and "failed" not in x for x in lines), tail
    bench = json.loads((tmp_path / "verbs_bench.json").read_text())
    assert bench["verbs_scenarios_per_second_in_guest"] > 0
    print(json.dumps(bench))  # the measured rates, shown with -rP
    print((tmp_path / "verbs_rates.jsonl").read_text())


def test_a_failed_boot_is_one_clear_error(monkeypatch, tmp_path):
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    monkeypatch.setattr(vm, "BOOT_TIMEOUT", 1)
    bad = tmp_path / "img"
    bad.mkdir()
    (bad / "vmlinuz").write_bytes(b"not a kernel")
    (bad / "rootfs.cpio").write_bytes(b"")
    monkeypatch.setattr(vm, "build", lambda log=True: bad)
    with pytest.raises(vm.VmError) as e:
        vm.run("true", timeout=20, stream=False)
    assert "\n" not in str(e.value)


@pytest.mark.slow
@pytest.mark.guest
@pytest.mark.skipif(bool(missing), reason=f"the soft-RoCE guest needs {', '.join(missing)} (make vm-deps)")
def test_vm_run_streams_the_commands_output(capsys):
    """`epfuzz vm run -- CMD` shows CMD's output: the kernel boots quiet, so only the command's
    own marker tells where it starts (without it nothing was printed at all)."""
    from epfuzz.cli.commands import main as cli

    assert cli(["vm", "run", "--", "sh", "-c", "echo out-of-the-guest; exit 3"]) == 3
    assert "out-of-the-guest" in capsys.readouterr().out


def _marked(f):
    """slow, guest, and skipped without the guest's tools."""
    f = pytest.mark.skipif(bool(missing), reason=f"the soft-RoCE guest needs {', '.join(missing)} (make vm-deps)")(f)
    return pytest.mark.slow(pytest.mark.guest(f))


@_marked
def test_a_command_longer_than_the_kernel_command_line_runs():
    """The command goes in through the shared folder: 5,000 characters (the kernel command line
    holds 2,048, and a longer one never booted)."""
    rc, lines = vm.run(f"echo {'x' * 5000} | wc -c", timeout=300, stream=False)
    assert rc == 0 and "5001" in lines, lines[-5:]


@_marked
def test_a_boot_that_does_not_reach_the_guest_init_fails_with_that_reason(monkeypatch):
    """The BIOS prints lines before the kernel runs; the boot clock still fires, with its reason,
    long before the command's own timeout."""
    import time

    monkeypatch.setattr(vm, "BOOT_TIMEOUT", 1)
    t0 = time.monotonic()
    with pytest.raises(vm.VmError, match="did not boot in 1 s") as e:
        vm.run("true", timeout=300, stream=False)
    assert time.monotonic() - t0 < 60 and "\n" not in str(e.value)


@_marked
def test_a_maximal_scenario_runs_on_verbs_from_the_host():
    """A scenario whose JSON alone is longer than the kernel command line (16 overtakes, 4 spins,
    eight QPs' faults) runs in the guest and comes back with its verdict."""
    from epfuzz.backends import get_backend
    from epfuzz.protocols import get_protocol

    scn = codec.load_dict({
        "protocol": "dispatch_any", "payload": {"num_tokens": 8, "hidden_bytes": 1024},
        "topology": {"num_channels": 8, "num_qps": 8, "channel_qp": [0] * 8},
        "schedule": [{"stage": "pcie", "index": 65535 - i, "distance": 64} for i in range(16)],
        "faults": {"spins": [{"channel": 7, "before_op": 63, "ns": 65535}] * 4, "qp_delay_ns": [0] * 8,
                   "qp_rate_div": [1] * 8}})
    assert len(scn.to_json(indent=None)) > 2000
    out = get_backend("verbs").run(scn, get_protocol(scn.protocol), repeats=1)
    assert out.runs == 1 and out.violation is None, out.summary


@_marked
def test_a_verbs_campaign_runs_in_the_guest_and_its_run_folder_comes_back(tmp_path, capsys):
    """`epfuzz fuzz --backend verbs` runs the campaign in the guest, in a run folder in the guest's
    tmpfs that is copied to the host's at the end: the summary is read from that copy. Nothing the
    host shows names a guest path, and every replay line says it replays on verbs."""
    import csv

    from epfuzz.campaign.guest import GUEST_RUN
    from epfuzz.campaign.libfuzzer import fuzz

    run = tmp_path / "run"
    s = fuzz("dispatch_any", 15, backend="verbs", run_dir=run, progress=False)
    assert s.execs >= 98, s.render()  # every seed input, then mutations
    assert s.harness_errors == 0, s.render()
    assert len((run / "progress.csv").read_text().splitlines()) > 3
    assert any((run / "corpus").iterdir()) and (run / "bugs.csv").exists()
    shown = capsys.readouterr()
    assert GUEST_RUN not in shown.out + shown.err + s.render()
    assert "epfuzz fuzz" not in shown.out + shown.err  # the guest's own summary is not echoed
    # a bug row's replay line reads "replay:", "replay (minimized):" or, when verbs ran it more than once,
    # "replay (reproduced in 80% of runs):": one per bug in every form
    replays = [x for x in s.render().splitlines() if re.match(r"\s+replay( \([^)]*\))*: ", x)]
    assert len(replays) == len(s.bugs)
    assert all(re.search(r"--backend verbs( --repeats \d+)?$", x) and str(run.resolve()) in x for x in replays)
    assert all(row["case"].startswith(str(run)) for row in csv.DictReader((run / "bugs.csv").open()))


@_marked
def test_a_plugin_the_guest_cannot_import_fails_the_run_and_gives_its_run_folder_back(tmp_path):
    """A plug-in from the user's folder passes the host's pre-flight, but the guest has only epfuzz's tree: its
    campaign stopped at "cannot load protocol" before writing anything, and the host printed a summary of 0
    execs and "1 harness error(s)" (exit 3) for a --run-dir holding only its claimed corpus/ and an empty
    bugs.csv, so the retry was refused as not empty. It is now the guest's error, and the folder is given back.
    (The plug-in's own file and the modules it imports from its folder travel to the guest; a module it finds
    through the host's PYTHONPATH does not.)"""
    import os
    import subprocess
    import sys
    from pathlib import Path

    proj, lib = tmp_path / "proj", tmp_path / "lib"
    proj.mkdir()
    lib.mkdir()
    (lib / "users_helper.py").write_text("X = 1\n")
    src = (Path(__file__).resolve().parents[2] / "examples" / "seqflag.py").read_text()
    (proj / "users_seqflag.py").write_text(src + "\nimport users_helper  # noqa: E402, F401\n")
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(x for x in (str(lib), os.environ.get("PYTHONPATH")) if x)}
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "--protocol", "users_seqflag:SeqFlag", "--backend",
                        "verbs", "--time", "5", "--run-dir", str(run)], cwd=proj, capture_output=True, text=True,
                       timeout=900, env=env)
    assert p.returncode == 2, p.stdout + p.stderr
    assert ("epfuzz: the campaign in the guest stopped before writing anything (exit 2): cannot load protocol "
            "'users_seqflag:SeqFlag'") in p.stderr, p.stdout + p.stderr
    assert "harness error(s)" not in p.stdout and not run.exists()


@_marked
def test_a_users_plugin_runs_on_verbs_through_the_cli(tmp_path):
    """`epfuzz run case.json --backend verbs --protocol crossflag:CrossFlag`, run beside crossflag.py, booted
    the guest, which had the project alone: "No module named 'crossflag'" in traceback pieces after 90 s
    (new-user trial item 4). The plug-in's file goes with the scenario and loads there by the same name, with
    the module beside it that it imports (which failed there in one line: new-user trial, leftover item 2)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    (tmp_path / "guestflag_help.py").write_text("X = 1\n")
    src = (ROOT / "examples" / "seqflag.py").read_text()
    (tmp_path / "guestflag.py").write_text(src + "\nimport guestflag_help  # noqa: E402, F401\n")
    (tmp_path / "case.json").write_text(json.dumps({"protocol": "guestflag:SeqFlag",
                                                    "payload": {"num_tokens": 4, "hidden_bytes": 256}}))
    p = subprocess.run([sys.executable, "-m", "epfuzz", "run", "case.json", "--backend", "verbs", "--protocol",
                        "guestflag:SeqFlag"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert "on soft-RoCE" in p.stdout + p.stderr, p.stdout + p.stderr


@_marked
def test_a_users_plugin_is_fuzzed_on_verbs_in_the_guest_through_the_cli(tmp_path):
    """The guest campaign had the same gap as `run`: its preflight and its libFuzzer jobs look for the
    plug-in in the current folder, which in the guest held the project alone. They run in the plug-in's
    folder there, as on the host."""
    import shutil as sh
    import subprocess
    import sys

    from tests.conftest import ROOT

    sh.copy(ROOT / "examples" / "seqflag.py", tmp_path / "guestflag.py")
    run = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "--protocol", "guestflag:SeqFlag", "--backend",
                        "verbs", "--time", "10", "--run-dir", str(run)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert "No module named" not in p.stdout + p.stderr
    rows = (run / "progress.csv").read_text().splitlines()[1:]
    assert rows and int(rows[-1].split(",")[1]) > 0, p.stdout + p.stderr
