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
import os
import shutil
import sys
import tarfile
from pathlib import Path

from epfuzz.infra.errors import Unsupported
from epfuzz.infra.shipped import PACKAGE, source_root

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


#: where the guest unpacks a plug-in the host loaded from outside the project, and runs the command from
GUEST_PLUGIN = "/tmp/plugin"
PLUGIN_TAR = "plugin.tar"
#: a plug-in package bigger than this is no plug-in's source alone (data, vendored libraries): not shipped
PLUGIN_MAX_BYTES = 4 << 20


def plugin_root(spec: str) -> Path | None:
    """The module file or package folder the host imported for plug-in `spec` (module:Attr), or None
    when the guest has it already: a module of epfuzz, or one at the top of the shipped checkout (the
    guest runs in its copy, where the same name finds it). The host loads it first, as the command does."""
    from epfuzz.protocols import REGISTRY
    from epfuzz.protocols.trust import check_spec, inside

    REGISTRY.get(spec)
    top = check_spec(spec)[0].split(".")[0]
    mod = sys.modules[top]
    file = getattr(mod, "__file__", None)
    if not file:
        raise Unsupported(f"backend verbs: plug-in {spec!r} is the namespace package {top} (no __init__.py), which "
                          "the guest cannot be sent; only single-file plug-ins run on verbs")
    root = Path(file).resolve()
    if hasattr(mod, "__path__"):
        root = root.parent
    tree = source_root(PACKAGE)
    if inside(str(root), PACKAGE) or tree is not None and root.parent == tree.resolve() and _wanted(
            tarfile.TarInfo(f"./{root.name}")) is not None:
        return None
    return root


def _plugin_files(spec: str, root: Path) -> list[Path]:
    """The files of a plug-in package, if it is Python sources alone of modest size; else `Unsupported`
    in one line, before a guest boots."""
    files, size = [], 0
    for p in sorted(root.rglob("*")):
        if SKIP_ANY.intersection(p.relative_to(root).parts) or p.is_dir() and not p.is_symlink():
            continue
        if p.is_symlink() or p.suffix != ".py":
            raise Unsupported(f"backend verbs: plug-in {spec!r} is the package {root}, which holds {p.name} as well "
                              "as Python sources; only single-file plug-ins (or packages of .py files alone) run "
                              "on verbs")
        files.append(p)
        size += p.stat().st_size
    if size > PLUGIN_MAX_BYTES:
        raise Unsupported(f"backend verbs: plug-in {spec!r} is the package {root} of {size >> 10} KiB of sources "
                          f"(more than {PLUGIN_MAX_BYTES >> 20} MiB); only single-file plug-ins run on verbs")
    return files


def _siblings(spec: str, root: Path) -> list[Path]:
    """The source files of the modules the host imported from the plug-in's own folder beside it (a
    `myproto.py` doing `import myhelpers`): that folder was on sys.path while the plug-in was imported, so
    the guest needs them there too. A module counts when its top-level name is a file or package folder
    directly in that folder (the folder holding a virtual environment or a checkout does not make their
    modules siblings); one that is not Python source is refused in one line, before a guest boots."""
    folder = root.parent
    out: set[Path] = set()
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        top = name.split(".")[0]
        if not file or top == root.stem:
            continue
        here = Path(os.path.abspath(file))  # as imported: a sibling may be a link to a file elsewhere
        try:
            rel = here.parent.resolve().relative_to(folder) / here.name
        except ValueError:
            continue
        if rel.parts[0] != top and rel.parts[0].split(".")[0] != top:  # top.py, top/..., an extension top.*.so
            continue
        if here.suffix != ".py":
            raise Unsupported(f"backend verbs: plug-in {spec!r} imports {name} from {here}, which is not Python "
                              "source; only .py sources travel to the guest")
        out.add(folder / rel)
    return sorted(out)


def plugin_shipment(spec: str) -> tuple[dict[str, bytes], str]:
    """What a guest command needs for protocol `spec` that the project tree lacks: the files for the
    command share (a tar of the plug-in's module file or package folder, as the host found it, and the
    sources of the modules it imported from its folder, `_siblings`) and the shell line that unpacks them
    and enters their folder, so the guest resolves the names as the host did (in the current folder;
    `python3 -P` keeps it off sys.path but for the plug-in's import). Nothing for a built-in protocol or
    one the tree carries."""
    if ":" not in spec:
        return {}, ""
    root = plugin_root(spec)
    if root is None:
        return {}, ""
    if not root.is_dir() and root.suffix != ".py":
        raise Unsupported(f"backend verbs: plug-in {spec!r} is {root}, not Python source; only single-file "
                          "plug-ins run on verbs")
    files = (_plugin_files(spec, root) if root.is_dir() else [root]) + _siblings(spec, root)
    size = sum(f.stat().st_size for f in files)
    if size > PLUGIN_MAX_BYTES:
        raise Unsupported(f"backend verbs: plug-in {spec!r} and the modules it imports from {root.parent} are "
                          f"{size >> 10} KiB of sources (more than {PLUGIN_MAX_BYTES >> 20} MiB), too much to "
                          "send to the guest")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            info = tar.gettarinfo(str(f.resolve()), arcname=str(f.relative_to(root.parent)))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            with f.open("rb") as fh:
                tar.addfile(info, fh)
    shell = (f"mkdir -p {GUEST_PLUGIN} && tar -xf /mnt/cmd/{PLUGIN_TAR} -C {GUEST_PLUGIN} && cd {GUEST_PLUGIN} "
             "|| { echo 'epfuzz-guest: plug-in unpack failed'; exit 2; }\n")
    return {PLUGIN_TAR: buf.getvalue()}, shell
