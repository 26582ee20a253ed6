"""`--feedback MODULE:ATTR` and `--moves MODULE:ATTR`: search parts from outside the package.

The same trust rule as a `--protocol` plug-in (epfuzz.protocols.trust): a module is imported
only because the user named it on the command line, with the current folder on `sys.path`
for that import alone, and an exception raised by its code is blamed on it (one line, with
its file and line) rather than on epfuzz.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from epfuzz.infra.errors import InputError
from epfuzz.protocols import REGISTRY
from epfuzz.protocols.trust import check_spec


def load_object(spec: str, flag: str) -> Any:
    """`module:attr`'s object, imported now because `flag` named it (the registry's one plug-in import)."""
    try:
        check_spec(spec)
    except InputError:
        raise InputError(f"{flag} {spec!r} is not `module:attr` (dotted Python identifiers, one colon, "
                         "an identifier)") from None
    return REGISTRY.import_named(spec, Path.cwd(), what=f"{flag} {spec}")
