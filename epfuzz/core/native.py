"""Which emulator modules this process runs: the mypyc-compiled ones or their pure-Python sources.

`make install` compiles the hot `sim` modules with mypyc (`epfuzz.core.corebuild`); each
extension sits beside its `.py`, and Python's own import system prefers it. This
module decides, once per process and for all of them together (compiled code calls
its compiled neighbours directly, so a mix is never loaded), whether to keep that
preference or to load the sources instead. Sources win when:

- `EPFUZZ_PURE=1` (the equivalence test runs the pure path this way);
- (atheris no longer counts: nothing of epfuzz is line-instrumented, issue 34.2, so a harness
  runs the compiled emulator too; its coverage is the semantic features);
- the extensions are stale: a source changed after the build (the manifest's hash
  differs), or no manifest says they were built from these sources. A one-line note
  says so; `make install` rebuilds.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:  # mypy_extensions comes with mypy (the `core` extra): a pure install runs without it
    try:
        from mypy_extensions import mypyc_attr
    except ImportError:
        def mypyc_attr(*args: Any, **kwargs: Any) -> Any:
            """`mypy_extensions.mypyc_attr` where it is not installed: the sources run as they are."""
            return lambda cls: cls

PACKAGE_DIR = Path(__file__).resolve().parent.parent
#: the modules mypyc compiles, in dependency order (`epfuzz.core.corebuild` builds exactly these)
COMPILED: tuple[str, ...] = (
    "epfuzz.sim.packets", "epfuzz.sim.netmoves", "epfuzz.sim.adversary", "epfuzz.sim.responder",
    "epfuzz.sim.pass_rules", "epfuzz.sim.nvlink", "epfuzz.sim.port", "epfuzz.sim.sendq", "epfuzz.sim.requester",
    "epfuzz.sim.lazydata", "epfuzz.sim.stalediff", "epfuzz.sim.memory", "epfuzz.sim.spans",
    "epfuzz.sim.receive", "epfuzz.sim.run", "epfuzz.sim.built", "epfuzz.sim.engine", "epfuzz.sim.explore",
    "epfuzz.protocols.opcheck", "epfuzz.ir.payload", "epfuzz.model.epoch", "epfuzz.model.oracle",
    "epfuzz.search.featcore", "epfuzz.search.schedcore",
    # the built-in protocols whose sender and receiver run per execution (issue 31.3): their classes derive
    # from base.py's plain-Python Protocol and Receiver (kept so: a plug-in subclasses them, and an ABC's
    # abstract checks and class-level overrides hold only outside mypyc), so mypyc compiles them as ordinary
    # Python classes with compiled methods, open to interpreted subclasses (`mypyc_attr` below)
    # what their receivers make their accepts with, without `Consume`'s plain-Python __init__ (consmake)
    "epfuzz.protocols.consmake", "epfuzz.protocols.dispatchops",
    "epfuzz.protocols.dispatch", "epfuzz.protocols.deep", "epfuzz.protocols.deep2", "epfuzz.protocols.inband_tag",
    "epfuzz.protocols.shared_counter", "epfuzz.protocols.memread",
    # what those senders make their ops with, without the op classes' plain-Python __init__ (`epfuzz.ir.opmake`)
    "epfuzz.ir.opmake",
    # the scenario decoder's loop over a plan as data (issue 31.3: `epfuzz.encoding.plancore` says why a loop)
    "epfuzz.encoding.plancore",
)
MANIFEST = PACKAGE_DIR / "_core_manifest.json"
#: how to rebuild the compiled core, with this very interpreter (a bare `python` may be another one: a user
#: trial typed the advice outside its venv and got the system Python's "No module named 'epfuzz'")
REBUILD = f"`make install` in a checkout, or {sys.executable} -m epfuzz.core.corebuild"

_choice: str | None = None  # "compiled" or "pure", fixed by the first compiled-set import


def source(name: str) -> Path:
    return PACKAGE_DIR.parent.joinpath(*name.split(".")).with_suffix(".py")


def extension(name: str) -> Path | None:
    """The built extension of module `name`, if there is one beside its source."""
    src = source(name)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = src.with_suffix(suffix)
        if p.exists():
            return p
    return None


def digest(names: Sequence[str] = COMPILED) -> str:
    """One hash over the sources: what the manifest records at build time."""
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode())
        h.update(source(name).read_bytes())
    return h.hexdigest()


def stale_reason() -> str | None:
    """Why the extensions cannot be used (None: they are complete and built from these sources)."""
    if any(extension(n) is None for n in COMPILED):
        return "not every compiled module was built"
    if not all(source(n).exists() for n in COMPILED):
        return None  # a frozen bundle (OSS-Fuzz's PyInstaller build) ships extensions without sources
    try:
        built = json.loads(MANIFEST.read_text())["sources"]
    except (OSError, ValueError, KeyError):
        return f"no readable {MANIFEST.name}"
    return None if built == digest() else "a source changed after the build"


def decide() -> str:
    """'compiled' or 'pure' for this process (decided once; see the module docstring)."""
    global _choice
    if _choice is None:
        if not any(extension(n) for n in COMPILED):
            _choice = "pure"  # nothing built: the sources load the ordinary way, no note needed
        elif os.environ.get("EPFUZZ_PURE") == "1":
            _choice = "pure"
        else:
            why = stale_reason()
            if why is not None:
                sys.stderr.write(f"epfuzz: compiled emulator not used ({why}); running the pure-Python one "
                                 f"(rebuild: {REBUILD})\n")
            _choice = "pure" if why else "compiled"
    return _choice


def running() -> str:
    """What the emulator in this process actually runs, by the loaded module: 'compiled' or 'pure'."""
    mod = sys.modules.get("epfuzz.sim.engine") or importlib.import_module("epfuzz.sim.engine")
    return "pure" if str(mod.__file__).endswith(".py") else "compiled"


def describe() -> str:
    """Which emulator this process runs and, when it is the pure one, why and how to get the compiled
    one (`epfuzz list` prints it: a plain `pip install` builds no extension)."""
    from epfuzz.infra.extras import install_hint  # here: this module imports nothing of epfuzz at load

    if running() == "compiled":
        return "runs compiled (mypyc)"
    if not any(extension(n) for n in COMPILED):
        why = "not built in this install"
    elif os.environ.get("EPFUZZ_PURE") == "1":
        why = "EPFUZZ_PURE=1"
    else:
        why = stale_reason() or "not loaded"
    return (f"runs pure Python, slower (compiled core: {why}; to build it: `make install` in a checkout, "
            f"or {install_hint('core')} then {sys.executable} -m epfuzz.core.corebuild)")


class PureFinder(importlib.abc.MetaPathFinder):
    """Loads a compiled-set module from its `.py` when `decide()` says pure; otherwise stays out of the way."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COMPILED or decide() != "pure" or not source(fullname).exists():
            return None  # no source (a frozen bundle): the ordinary import finds what there is
        return importlib.util.spec_from_file_location(fullname, source(fullname))


def install() -> None:
    """Put the finder first on `sys.meta_path` (idempotent): called by `epfuzz/__init__.py`."""
    if not any(isinstance(f, PureFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, PureFinder())
