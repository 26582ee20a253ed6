"""A full disk is one line, exit 2, the summary still printed, no empty files (issue 29.6).

Each command runs in a private mount namespace over a 96 KiB tmpfs (`unshare -m` as root, or
`unshare -rm` in a user namespace); where neither is allowed the test is skipped, saying so."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.hardening.util import EPFUZZ, ROOT


def _unshare() -> list[str] | None:
    for cmd in (["unshare", "-m"], ["unshare", "-rm"]):
        try:
            p = subprocess.run([*cmd, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True,
                               timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode == 0:
            return cmd
    return None


UNSHARE = _unshare()
pytestmark = pytest.mark.skipif(UNSHARE is None, reason="cannot mount a small tmpfs here (no unshare -m / -rm)")


def _on_full_disk(mnt: Path, *args: str, size: str = "96k",
                  fill: bool = False) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run epfuzz ARGS with `mnt` a tmpfs of `size` (`fill`: full before it starts); (the result, the
    empty files left under mnt)."""
    assert UNSHARE is not None
    mnt.mkdir(exist_ok=True)
    m = shlex.quote(str(mnt))
    filler = f"(cat /dev/zero > {m}/filler 2>/dev/null; true) && " if fill else ""
    script = (f"mount -t tmpfs -o size={size} tmpfs {m} && {filler}cd {shlex.quote(str(mnt.parent))} && "
              f"{shlex.quote(EPFUZZ)} {shlex.join(args)}; rc=$?; find {shlex.quote(str(mnt))} -type f -size 0 "
              f">&3; exit $rc")
    p = subprocess.run([*UNSHARE, "bash", "-c", f"exec 3>{shlex.quote(str(mnt.parent / 'empty.txt'))}; {script}"],
                       capture_output=True, text=True, timeout=300)
    return p, (mnt.parent / "empty.txt").read_text().split()


def _one_line_no_room(p: subprocess.CompletedProcess[str]) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    last = [x for x in p.stderr.splitlines() if not x.startswith("{") and x.strip()][-1]
    assert last.startswith("epfuzz: no space left on tmpfs (mounted at "), last


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["libfuzzer", "guided"])
def test_fuzz_on_a_full_disk(tmp_path, engine):
    mnt = tmp_path / "small"
    p, empty = _on_full_disk(mnt, "fuzz", "deepep_v2_dispatch", "--time", "20", "--engine", engine,
                             "--run-dir", str(mnt / "run"))
    _one_line_no_room(p)
    assert "epfuzz fuzz deepep_v2_dispatch_fuzzer:" in p.stdout and "the disk is full" in p.stdout, p.stdout
    assert empty == [], empty


def test_minimize_output_on_a_full_disk(tmp_path):
    mnt = tmp_path / "small"
    p, empty = _on_full_disk(mnt, "minimize", str(ROOT / "corpus/regressions/deepep661-c2b.json"), "-o",
                             str(mnt / "min.json"), size="64k", fill=True)
    _one_line_no_room(p)
    assert empty == [] and "min.json" in p.stderr
