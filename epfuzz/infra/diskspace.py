"""A full disk, said as such (issue 29.6).

`fuzz` on a full disk exited 3 ("a bug in epfuzz") with a traceback per reader thread, no
summary and empty crash files. A write that fails for want of space is no bug anywhere: it is
`NoSpace`, an input error (exit 2) whose one line names the file system and the file, and the
campaign that meets one stops fuzzing, removes what it left half-written and prints its summary.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from epfuzz.infra.errors import EpfuzzError

#: the errors of a write that found no room: space, quota, the file-size limit (ulimit -f)
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class NoSpace(EpfuzzError):
    """A write found no room; the message is the one line the CLI prints (exit 2). Not an
    `InputError`: code that skips one bad input file must not skip a finding it could not write."""

    def __init__(self, path: Path | str, err: OSError) -> None:
        why = "file too large (the file-size limit, ulimit -f)" if err.errno == errno.EFBIG else "no space left"
        super().__init__(f"{why} on {device_of(Path(path))} writing {path}")
        self.path = str(path)


def is_no_room(e: BaseException) -> bool:
    return isinstance(e, NoSpace) or isinstance(e, OSError) and e.errno in NO_ROOM


def device_of(path: Path) -> str:
    """'DEVICE (mounted at DIR)' of the file system holding `path` (the nearest existing parent)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        dev = p.stat().st_dev
        mount = p
        while mount != mount.parent and mount.parent.stat().st_dev == dev:
            mount = mount.parent
    except OSError:
        return str(p)
    name = "?"
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 1 and fields[1] == str(mount):
                name = fields[0]
    except OSError:
        pass
    return f"{name} (mounted at {mount})"


def remove_empty(folder: Path) -> list[Path]:
    """Delete the empty files under `folder` (what libFuzzer's or a log's write left when the disk
    filled: an empty crash artifact is no input); the ones removed."""
    gone = []
    for p in folder.rglob("*") if folder.is_dir() else []:
        try:
            if p.is_file() and not p.is_symlink() and p.stat().st_size == 0:
                p.unlink()
                gone.append(p)
        except OSError:
            continue
    return gone
