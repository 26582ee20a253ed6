"""Fault-injection fuzzing for GPU expert-parallel write-then-signal protocols."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

from epfuzz.core import native

native.install()  # the compiled emulator or its pure-Python sources, decided once (see epfuzz.core.native)

#: modules a plug-in protocol imported by their flat names before the packages by concern (issue 28):
#: `from epfuzz import ops`, `import epfuzz.ops` and `from epfuzz.scenario import Scenario` still work, with
#: a DeprecationWarning naming the new place, so protocols written against the flat layout keep loading.
#: Only what the plug-in reference documents is here.
MOVED: dict[str, str] = {
    "ops": "epfuzz.ir.ops",
    "scenario": "epfuzz.ir.scenario",
    "payload": "epfuzz.ir.payload",
    "fields": "epfuzz.ir.fields",
    "limits": "epfuzz.protocols.limits",
}


def _moved(name: str, stacklevel: int) -> ModuleType:
    new = MOVED[name]
    warnings.warn(f"epfuzz.{name} moved to {new}: import it from there", DeprecationWarning, stacklevel=stacklevel)
    return importlib.import_module(new)


def __getattr__(name: str) -> ModuleType:
    if name not in MOVED:
        raise AttributeError(f"module 'epfuzz' has no attribute {name!r}")
    return _moved(name, 3)


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import epfuzz.scenario` (a submodule import, which module __getattr__ does not see) gives the
    moved module itself under the old name: one module object, so isinstance checks hold across both."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        pkg, _, name = fullname.rpartition(".")
        if pkg != __name__ or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return _moved(spec.name.rpartition(".")[2], 4)

    def exec_module(self, module: ModuleType) -> None:
        """The moved module has run already."""


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())
