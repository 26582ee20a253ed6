"""The project as one file for the guest: packed on the host, unpacked into the guest's tmpfs.

Under TCG on a busy host every 9p round trip costs 10-60 ms of the guest's time (its vCPU
waits in the virtio kick), and Python's imports make hundreds of them (a stat of every
sys.path folder per top-level import, then each source file): importing epfuzz from the 9p
share took 22-57 s in the guest, from tmpfs 6-10 s. One tar through the command share is a
few large reads. The 9p share of the work tree stays mounted (at /mnt/epfuzz) as it was.

What is shipped is the source checkout when epfuzz runs from one, and otherwise the installed
package alone: the folder above an installed package is site-packages, whose host-built numpy and
atheris would shadow the guest's own ("No module named 'numpy._core._multiarray_umath'").
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

from epfuzz.infra.shipped import source_root

#: where the guest unpacks the project and runs the command
GUEST_ROOT = "/tmp/epfuzz"
#: top-level entries a guest command never needs (run outputs, environments, caches, VCS)
SKIP_TOP = frozenset({"runs", "build", "dist"})
SKIP_ANY = frozenset({"__pycache__"})
#: files built on the host for the host's Python (bytecode, the compiled emulator and its manifest): the
#: guest's Python runs the pure sources instead of loading extensions built against another interpreter
SKIP_BUILT = (".pyc", ".so", "_core_manifest.json")


def _wanted(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    parts = Path(info.name).parts  # "./epfuzz/x.py" -> ("epfuzz", "x.py"); the root itself -> ()
    if parts:
        top = parts[0]
        if top.startswith(".") or top in SKIP_TOP or top.endswith(".egg-info"):
            return None
    if SKIP_ANY.intersection(parts) or info.name.endswith(SKIP_BUILT) or not (info.isfile() or info.isdir()):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def stage(package: Path, scratch: Path) -> Path:
    """The folder to pack and share with the guest: the checkout, or a copy of the installed package
    alone (as `scratch`/tree/epfuzz, without the host's bytecode and extensions)."""
    root = source_root(package)
    if root is not None:
        return root
    tree = scratch / "tree"
    shutil.copytree(package, tree / package.name, symlinks=False,
                    ignore=shutil.ignore_patterns(*SKIP_ANY, *(f"*{s}" for s in SKIP_BUILT)))
    return tree


def pack(root: Path) -> bytes:
    """The project folder as an uncompressed tar (the guest would spend longer inflating it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(root), arcname=".", filter=_wanted)
    return buf.getvalue()


def prologue(tar_path: str) -> str:
    """Shell lines that unpack the tar and make it the command's project folder (bytecode cached
    in tmpfs); if unpacking fails, the command runs from the 9p share as before."""
    return (f"if mkdir -p {GUEST_ROOT} && tar -xf {tar_path} -C {GUEST_ROOT}; then cd {GUEST_ROOT}; "
            f"export PYTHONPATH={GUEST_ROOT} PYTHONPYCACHEPREFIX=/tmp/pycache; unset PYTHONDONTWRITEBYTECODE; "
            "else echo 'epfuzz-guest: project unpack failed, running from the 9p share'; fi\n")
