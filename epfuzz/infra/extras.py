"""Optional parts of epfuzz and the extra that brings each one.

A missing optional library is the user's install, not a bug in epfuzz: the command says in one
line which extra to install and exits 2 (an `InputError`), before it has done any work, instead of
ending in a ModuleNotFoundError reported as a harness error (exit 3).
"""

from __future__ import annotations

import importlib.util

from epfuzz.infra.errors import InputError

#: importable module -> the `pip install 'epfuzz[EXTRA]'` name that installs it
EXTRAS = {"matplotlib": "plot", "torch": "cuda", "cupy": "cuda", "mypyc": "core"}


class MissingExtra(InputError):
    """An optional library this command needs is not installed; the message names the extra."""


def require(module: str, what: str, alternative: str = "") -> None:
    """Raise `MissingExtra` unless `module` can be imported; `what` names the feature that needs it."""
    if importlib.util.find_spec(module) is None:
        extra = EXTRAS[module]
        raise MissingExtra(f"{what} needs {module}: pip install 'epfuzz[{extra}]'" + (f" ({alternative})"
                                                                                   if alternative else ""))
