"""Boot the soft-RoCE guest once and run tests/guest inside it (the verbs backend on real rxe).

Marked `guest`: `make test` runs them after the parallel suite, alone, because the guest's
timing tests (a throttled QP must delay data past the receiver's next look) fail when the
emulated CPUs are starved by other tests."""

from __future__ import annotations

import json
import shutil

import pytest

from epfuzz import vm

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
    from epfuzz.cli import main as cli

    assert cli(["vm", "run", "--", "sh", "-c", "echo out-of-the-guest; exit 3"]) == 3
    assert "out-of-the-guest" in capsys.readouterr().out
