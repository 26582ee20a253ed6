"""`--feedback MODULE:ATTR` and `--moves MODULE:ATTR`: search parts from outside the package.

The same trust rule as a `--protocol` plug-in (epfuzz.protocols.trust): a module is imported
only because the user named it on the command line, with the current folder on `sys.path`
for that import alone, and an exception raised by its code is blamed on it (one line, with
its file and line) rather than on epfuzz.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from epfuzz.errors import InputError, ProtocolError
from epfuzz.protocols import REGISTRY
from epfuzz.protocols.registry import describe
from epfuzz.protocols.trust import check_spec


def load_object(spec: str, flag: str) -> Any:
    """`module:attr`'s object, imported now because `flag` named it."""
    try:
        mod_name, attr = check_spec(spec)
    except InputError:
        raise InputError(f"{flag} {spec!r} is not `module:attr` (dotted Python identifiers, one colon, "
                         "an identifier)") from None
    entry = str(Path.cwd())
    sys.path.insert(0, entry)
    try:
        root = REGISTRY._root_of(mod_name.split(".")[0])
        if root is not None:
            REGISTRY.plugin_roots.add(root)
        mod = importlib.import_module(mod_name)
        obj = getattr(mod, attr)
    except (ImportError, AttributeError) as e:
        raise InputError(f"{flag} {spec}: cannot load it: {e}") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the plug-in's own code, run at import
        raise ProtocolError(f"{flag} {spec}: its import failed: {describe(e)}{REGISTRY.where(e)}") from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)
    file = getattr(mod, "__file__", None)
    if file:
        REGISTRY.plugin_files.add(os.path.realpath(file))
    return obj
