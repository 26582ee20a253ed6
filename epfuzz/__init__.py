"""Fault-injection fuzzing for GPU expert-parallel write-then-signal protocols."""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

from epfuzz.core import native

native.install()  # the compiled emulator or its pure-Python sources, decided once (see epfuzz.core.native)

#: modules a plug-in protocol imported by their flat names before the packages by concern (issue 28):
#: `from epfuzz import ops` still works, with a DeprecationWarning naming the new place, so protocols
#: written against the flat layout keep loading. Only what the plug-in reference documents is here.
MOVED: dict[str, str] = {
    "ops": "epfuzz.ir.ops",
    "scenario": "epfuzz.ir.scenario",
    "payload": "epfuzz.ir.payload",
    "fields": "epfuzz.ir.fields",
    "limits": "epfuzz.protocols.limits",
}


def __getattr__(name: str) -> ModuleType:
    new = MOVED.get(name)
    if new is None:
        raise AttributeError(f"module 'epfuzz' has no attribute {name!r}")
    warnings.warn(f"epfuzz.{name} moved to {new}: import it from there", DeprecationWarning, stacklevel=2)
    return importlib.import_module(new)
