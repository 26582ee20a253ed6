"""`corpus merge` and `corpus prune` change only the inputs they manage, work with a relative
folder, lock it, and leave nothing behind when a signal stops them (issue 29.2, 29.3)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.hardening.util import EPFUZZ, ROOT, epfuzz

H = "deepep_v2_dispatch_fixed_fuzzer"
pytestmark = pytest.mark.slow


def _corpus(tmp: Path, name: str = "c") -> Path:
    c = tmp / name
    shutil.copytree(ROOT / "corpus" / H, c)
    return c


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _children_of_tmp(tmp: Path) -> list[int]:
    """Processes whose command line names a path under `tmp` (a merge child working there)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if str(tmp).encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def test_prune_leaves_what_it_does_not_manage_and_names_it(tmp_path):
    c = _corpus(tmp_path)
    mine = {"README.md": b"# my corpus\n", ".gitkeep": b"", "notes": b"seed 3 came from the #661 repro\n",
            "sub/deep.bin": b"\x01\x02", "sub/README.md": b"nested\n"}
    for name, data in mine.items():
        (c / name).parent.mkdir(exist_ok=True)
        (c / name).write_bytes(data)
    p = epfuzz(tmp_path, "corpus", "prune", H, "c")
    assert p.returncode == 0, p.stderr
    after = _snapshot(c)
    for name, data in mine.items():
        assert after.get(name) == data, name  # same name, same bytes, same folder
    note = [x for x in p.stdout.splitlines() if x.startswith("left ")]
    assert len(note) == 1 and all(n in note[0] for n in ("README.md", ".gitkeep", "notes", "sub/")), p.stdout
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c"]  # no temp folder, no lock file left


def test_merge_and_prune_take_a_relative_folder(tmp_path):
    _corpus(tmp_path, "src")
    p = epfuzz(tmp_path, "corpus", "merge", H, "dest", "src")
    assert p.returncode == 0 and "merged" in p.stdout, p.stderr
    assert len(list((tmp_path / "dest").iterdir())) > 0
    p = epfuzz(tmp_path, "corpus", "prune", H, "dest")
    assert p.returncode == 0 and "pruned dest" in p.stdout, p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["dest", "src"]


def _start_prune(tmp_path: Path, c: Path) -> tuple[subprocess.Popen[str], Path]:
    """A prune under way: its libFuzzer merge child has started (its log exists)."""
    p = subprocess.Popen([EPFUZZ, "corpus", "prune", H, str(c)], cwd=tmp_path, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(3000):  # up to 300 s for the child to appear (steps of 0.1 s): a bound, not a measure (load)
        logs = list(tmp_path.glob(f".{c.name}.epfuzz-tmp-*/scratch/merge.log"))
        if logs or p.poll() is not None:
            break
        time.sleep(0.1)
    assert logs, p.communicate()
    return p, logs[0].parent.parent


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stopped_prune_cleans_up_and_ends_its_child(tmp_path, sig):
    c = _corpus(tmp_path)
    before = _snapshot(c)
    p, tmp = _start_prune(tmp_path, c)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig and "Traceback" not in err, (p.returncode, err)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c"]
    assert _snapshot(c) == before  # stopped before the kept set was final: nothing removed
    for _ in range(600):  # up to 60 s on a loaded machine
        if not _children_of_tmp(tmp):
            break
        time.sleep(0.1)
    assert not _children_of_tmp(tmp)


def test_a_killed_prune_takes_its_child_along_and_the_next_one_cleans_up(tmp_path):
    c = _corpus(tmp_path)
    before = _snapshot(c)
    p, tmp = _start_prune(tmp_path, c)
    p.kill()
    p.wait(timeout=30)
    for _ in range(600):  # the kernel sends the child SIGKILL when its parent dies (60 s: a bound, not a measure)
        if not _children_of_tmp(tmp):
            break
        time.sleep(0.1)
    assert not _children_of_tmp(tmp)
    assert _snapshot(c) == before
    q = epfuzz(tmp_path, "corpus", "prune", H, "c")
    assert q.returncode == 0, q.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c"]  # the killed one's temp folder is gone


def test_a_second_prune_of_a_locked_folder_fails_at_once(tmp_path):
    """The lock a running prune holds (taken here, so the test does not race one prune against another)."""
    from epfuzz.infra.folder_lock import locked

    c = _corpus(tmp_path)
    with locked(c):
        q = epfuzz(tmp_path, "corpus", "prune", H, "c", timeout=120)
        m = epfuzz(tmp_path, "corpus", "merge", H, "c", str(ROOT / "corpus" / H), timeout=120)
    for p in (q, m):
        assert p.returncode == 2 and "being changed by another" in p.stderr, p.stderr
        assert f"pid {os.getpid()}" in p.stderr, p.stderr
    assert os.listdir(tmp_path) == ["c"]  # the lock and the temp folder went with the holder
    assert epfuzz(tmp_path, "corpus", "prune", H, "c").returncode == 0
