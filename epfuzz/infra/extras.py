"""Optional parts of epfuzz and the extra that brings each one.

A missing optional library is the user's install, not a bug in epfuzz: the command says in one
line which extra to install and exits 2 (an `InputError`), before it has done any work, instead of
ending in a ModuleNotFoundError reported as a harness error (exit 3).
"""

from __future__ import annotations

import importlib.util
import shlex
import sys

from epfuzz.infra.errors import InputError

#: importable module -> the `pip install 'epfuzz[EXTRA]'` name that installs it
EXTRAS = {"matplotlib": "plot", "torch": "cuda", "cupy": "cuda", "mypyc": "core"}


def install_hint(extra: str) -> str:
    """The command that adds `extra` to this epfuzz: this interpreter's pip, which finds epfuzz installed and
    adds only the extra's libraries. A bare `pip install 'epfuzz[X]'` from another environment would fetch
    whatever PyPI serves as "epfuzz" (epfuzz is not there: anyone's package could be; review)."""
    return f"{shlex.quote(sys.executable)} -m pip install 'epfuzz[{extra}]'"


class MissingExtra(InputError):
    """An optional library this command needs is not installed; the message names the extra."""


def require(module: str, what: str, alternative: str = "") -> None:
    """Raise `MissingExtra` unless `module` can be imported; `what` names the feature that needs it."""
    if importlib.util.find_spec(module) is None:
        extra = EXTRAS[module]
        tail = f" ({alternative})" if alternative else ""
        raise MissingExtra(f"{what} needs {module}: {install_hint(extra)}{tail}")
