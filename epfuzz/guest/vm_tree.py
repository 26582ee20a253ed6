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


def _package_files(spec: str, pkg: Path, arc: str, verb: str) -> dict[str, Path]:
    """The files of package folder `pkg` (`arc` in the tar), if it holds Python sources alone: name in the tar
    -> file, by the path as imported (a link to a .py file or a folder ships what it points to, under the link's
    name); anything else (a data file, an extension, a link to nothing, a folder linked twice) is `Unsupported` in
    one line, before a guest boots. `verb`: "is" for the plug-in's own package, "imports" for one it imports."""
    out: dict[str, Path] = {}
    seen: set[str] = set()
    for here, dirs, names in os.walk(pkg, followlinks=True):
        real = os.path.realpath(here)
        if real in seen:
            raise Unsupported(f"backend verbs: plug-in {spec!r} {verb} the package {pkg}, whose "
                              f"{Path(here).relative_to(pkg)} links to a folder already in it (a loop); only "
                              "packages of .py files run on verbs")
        seen.add(real)
        dirs[:] = [d for d in dirs if d not in SKIP_ANY]
        for name in names:
            p = Path(here, name)
            if p.suffix != ".py" or not p.is_file():
                raise Unsupported(f"backend verbs: plug-in {spec!r} {verb} the package {pkg}, which holds "
                                  f"{p.relative_to(pkg)} as well as Python sources; only single-file plug-ins (or "
                                  "packages of .py files alone) run on verbs")
            out[f"{arc}/{p.relative_to(pkg).as_posix()}"] = p
    return out


def _shipped(spec: str, root: Path) -> dict[str, Path]:
    """Name in the tar -> file: the plug-in (its module file, or its package whole) and the modules its import
    brought in from the folder put on sys.path for it (registry's `plugin_modules`: a `myproto.py` doing `import
    myhelpers`), each by its dotted name's path as imported; a package among them travels whole, for the
    submodules it imports later (`importlib.import_module("mypkg.later")` in sender()). A module the plug-in
    imports that is not Python source is `Unsupported` in one line."""
    from epfuzz.protocols import REGISTRY
    from epfuzz.protocols.trust import check_spec

    mod_name = check_spec(spec)[0]
    top = mod_name.split(".")[0]
    brought = {n: Path(f) for n, f in REGISTRY.plugin_modules.get(mod_name, {}).items()}
    if top not in brought:  # found elsewhere (site-packages), or imported before: as the host found it
        brought[top] = root / "__init__.py" if root.is_dir() else root
    out: dict[str, Path] = {}
    for name, file in sorted(brought.items()):
        parts = name.split(".")
        if any(".".join(parts[:i]) in brought for i in range(1, len(parts))):
            continue  # in a package that travels whole
        verb = "is" if parts[0] == top else "imports"
        arc = "/".join(parts)
        if file.name.startswith("__init__."):
            out |= _package_files(spec, file.parent, arc, verb)
        elif file.suffix != ".py":
            raise Unsupported(f"backend verbs: plug-in {spec!r} {verb} {name} from {file}, which is not Python "
                              "source; only .py sources travel to the guest")
        else:
            out[f"{arc}.py"] = file
    return out


def plugin_shipment(spec: str) -> tuple[dict[str, bytes], str]:
    """What a guest command needs for protocol `spec` that the project tree lacks: the files for the
    command share (a tar of the plug-in's module file or package folder and the modules its import brought in
    from its folder, `_shipped`, 4 MiB of sources at most) and the shell line that unpacks them and enters
    their folder, so the guest resolves the names as the host did (in the current folder;
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
    files = _shipped(spec, root)
    size = sum(f.stat().st_size for f in files.values())
    if size > PLUGIN_MAX_BYTES:
        raise Unsupported(f"backend verbs: plug-in {spec!r} ({root}) and the modules it imports beside it are "
                          f"{size >> 10} KiB of sources (more than {PLUGIN_MAX_BYTES >> 20} MiB), too much to "
                          "send to the guest; only single-file plug-ins (or packages of .py files) run on verbs")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for arc, f in sorted(files.items()):
            info = tar.gettarinfo(str(f.resolve()), arcname=arc)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            with f.open("rb") as fh:
                tar.addfile(info, fh)
    shell = (f"mkdir -p {GUEST_PLUGIN} && tar -xf /mnt/cmd/{PLUGIN_TAR} -C {GUEST_PLUGIN} && cd {GUEST_PLUGIN} "
             "|| { echo 'epfuzz-guest: plug-in unpack failed'; exit 2; }\n")
    return {PLUGIN_TAR: buf.getvalue()}, shell
