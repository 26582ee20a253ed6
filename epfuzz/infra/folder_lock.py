"""One writer per corpus folder: `corpus merge` and `corpus prune` lock the folder they change.

Two prunes of one folder at once swapped folders under each other and the second never ended
(issue 29.3). The lock is an flock(2) on a hidden file *beside* the folder (libFuzzer reads
every file inside a corpus folder, hidden ones too, as an input). The kernel drops it when the
holder dies, however it died, so a killed prune never leaves the folder locked; the file is
removed on release. A second writer fails at once, in one line, naming the holder.

Temporary folders of a merge or prune live beside the folder too, named after it
(`.NAME.epfuzz-tmp-*`): one found there while the lock is held belongs to a writer that was
killed (SIGKILL cannot be caught) and is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from epfuzz.infra.errors import InputError


def lock_path(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.epfuzz-lock"


def tmp_prefix(folder: Path) -> str:
    return f".{folder.name}.epfuzz-tmp-"


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[Path]:
    """Hold `folder`'s lock for the block and yield a fresh temporary folder beside it (removed
    after); stale temporary folders of killed writers are removed first."""
    folder = folder.resolve()
    path = lock_path(folder)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise InputError(f"{folder} is being changed by another epfuzz corpus merge or prune (pid {holder}); "
                             "run this one after it ends") from None
        try:  # the holder before us may have removed the file after we opened it: lock the one that is there
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        for stale in folder.parent.glob(tmp_prefix(folder) + "*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix(folder), dir=folder.parent))
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)
