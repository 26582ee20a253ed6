"""Which plug-in code a process may import: only what its user named (issue 29.1).

A case, a bare scenario or a finding file names its protocol; for a plug-in that name is
`module:Attr`, a Python module. Importing whatever a downloaded artifact names would run its
code (`cd artifact && epfuzz replay .` ran a `.py` lying beside a case; `{"protocol":
"this:x"}` imported an installed module). So a name read from a file is only *looked up*:
it resolves to a plug-in that was named on the command line (`--protocol MOD:ATTR`, or
`load_plugin` from Python) or whose module lies in a folder the user allowed
(`--allow-plugins PATH`), and is otherwise a one-line error that says how to allow it.

The current directory is never put on `sys.path` for good: a named plug-in is looked for
there while it is imported (the user named it: they run epfuzz beside it), an allowed
folder while a module of it is imported, and both are taken off again, so a later lazy
import (matplotlib for a plot) cannot pick up a file of the artifact folder instead.
"""

from __future__ import annotations

import difflib
import importlib.machinery
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from epfuzz.infra.errors import InputError

#: `pkg.module:Attr`: dotted identifiers, one colon, an identifier (`..:P` was a TypeError, exit 3)
SPEC = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def check_spec(spec: str) -> tuple[str, str]:
    """(module, attribute) of a well-formed plug-in name, or a one-line `InputError`."""
    if not SPEC.fullmatch(spec):
        raise InputError(f"protocol {spec!r} is not a built-in name nor a plug-in `module:Attr` "
                         "(dotted Python identifiers, one colon, an identifier)")
    mod, _, attr = spec.partition(":")
    return mod, attr


@dataclass
class PluginPolicy:
    """The plug-ins a process was told it may import."""

    named: set[str] = field(default_factory=set)          # specs named explicitly
    #: whether the running command takes --allow-plugins (run, replay, triage ...): only then does a plug-in that
    #: is not found suggest it (fuzz and corpus pointed at an option they do not have: review B1)
    offers_allow: bool = False
    folders: list[Path] = field(default_factory=list)     # --allow-plugins folders (resolved)
    files: list[Path] = field(default_factory=list)       # --allow-plugins FILE.py: that module alone

    def allow_path(self, path: Path) -> None:
        """`--allow-plugins PATH`: a folder (any module in it) or one `.py` file (that module)."""
        p = Path(path).expanduser()
        if p.is_dir():
            self.folders.append(p.resolve())
        elif p.is_file() and p.suffix == ".py":
            self.files.append(p.resolve())
        else:
            raise InputError(f"--allow-plugins {path}: not a folder nor a .py file")

    def folder_for(self, spec: str) -> Path | None:
        """The allowed folder holding `spec`'s top-level module or package, if one does (found by
        path alone: nothing is imported or executed to find out)."""
        mod, _ = check_spec(spec)
        top = mod.split(".")[0]
        for f in self.files:
            if f.stem == top and "." not in mod:
                return f.parent
        for d in self.folders:
            if importlib.machinery.PathFinder.find_spec(top, [str(d)]) is not None:
                return d
        return None

    def refusal(self, spec: str) -> InputError:
        """Why a plug-in a file names is not imported, and how to allow it. Where `--protocol` named another
        plug-in, the two names are said: "add --protocol wimm:WimmOtherQP" to a user who had typed
        `--protocol wimm:WimmOtherQp` read as if their option had been ignored (an author's trial)."""
        mod, _ = check_spec(spec)
        named = sorted(self.named)
        if named:
            other = (difflib.get_close_matches(spec, named, n=1, cutoff=0.0) or named)[0]
            how = " (in upper and lower case only)" if other.lower() == spec.lower() else ""
            return InputError(f"protocol {spec!r}, which the file names, is not the plug-in --protocol names "
                              f"({other}): the names differ{how}, and a file's plug-in code runs only when you "
                              f"name it: give --protocol {spec}, or --allow-plugins FOLDER for the folder its "
                              "module is in")
        return InputError(f"protocol {spec!r} is a plug-in (the Python module {mod}), and plug-in code runs only "
                          f"when you name it: add --protocol {spec}, or --allow-plugins FOLDER for the folder "
                          "its module is in (Python: epfuzz.protocols.load_plugin)")


def inside(path: str, root: Path) -> bool:
    """Whether the file `path` is `root` or lies under the folder `root` (both resolved)."""
    if not path:
        return False
    real = os.path.realpath(path)
    r = str(root)
    return real == r or real.startswith(r.rstrip(os.sep) + os.sep)
