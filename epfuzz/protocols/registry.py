"""Protocols by name, built-ins and plug-ins imported on first use, and the bug-zoo table derived from them.

A built-in protocol is a name and the module that defines it (`builtin`): its family is imported
when the name is first asked for, so importing the protocol API (what the oracle and the IR need)
imports no family; `items` (every protocol) imports them all. The zoo table is read off the
protocols' `pattern` links (a buggy and a fixed protocol sharing one `Pattern`), so adding a
pattern is adding its two protocols: no second list of patterns to keep in step.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.machinery
import itertools
import os
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from epfuzz.infra.errors import HarnessError, InputError, ProtocolError
from epfuzz.protocols.base import Pattern, Protocol
from epfuzz.protocols.trust import PluginPolicy, check_spec, inside

#: what `import_named` finds for an attribute the module lacks
_MISSING = object()
#: epfuzz's own package folder: a plug-in spec naming a module of it is no user code to blame
EPFUZZ_ROOT = Path(__file__).resolve().parent.parent


def describe(e: BaseException) -> str:
    """`Type: message` of an exception from plug-in code; a `sys.exit()` is said as such."""
    if isinstance(e, SystemExit):
        return f"it called {getattr(e, 'via', 'sys.exit')}({e.code!r})"
    return f"{type(e).__name__}: {e}"


def _from_folder(names: Iterable[str], folder: Path) -> dict[str, str]:
    """Of the modules `names` (new in sys.modules), those imported from `folder` by their dotted names (a.b.c from
    a/b/c.py, a/b/c/__init__.py or an extension a/b/c.*.so there): name -> its file, by the path as imported (a
    link in `folder` stays a link). A module of a folder below it (a checkout's epfuzz/epfuzz/, a virtual
    environment) is not one. Read off `__spec__.origin`, any exception caught: a lazy module's __getattr__ is
    never run."""
    base = os.path.abspath(folder)
    out = {}
    for name in names:
        try:
            origin = sys.modules[name].__spec__.origin  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - an arbitrary module object: whatever it raises, it has no file here
            continue
        if not isinstance(origin, str) or origin in ("built-in", "frozen"):
            continue
        here = os.path.abspath(origin)
        rel = Path(os.path.relpath(here, base)).parts
        parts = tuple(name.split("."))
        if rel[:-1] == parts and rel[-1].split(".")[0] == "__init__" or rel[:-1] == parts[:-1] and (
                rel[-1].split(".")[0] == parts[-1]):
            out[name] = here
    return out


class ZooRow(NamedTuple):
    """One bug-zoo pattern: its number, title, and the names of its buggy and fixed protocols."""

    number: int
    title: str
    bad: str
    fixed: str


def did_you_mean(typed: str, known: Iterable[str]) -> str:
    """'; did you mean A, B?' with up to three names of `known` close to `typed`, or ''."""
    close = difflib.get_close_matches(typed, list(dict.fromkeys(known)), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


def unknown_name(kind: str, typed: str, known: Iterable[str], also: str = "") -> str:
    """One short line for a name nobody registered: what the user typed and up to three close names.
    Listing all ~100 known names made one 3,000-character line in which the typo was hard to see."""
    return f"unknown {kind} {typed!r}{did_you_mean(typed, known)} ({also}`epfuzz list` lists them)"


def _not_a_protocol(spec: str, obj: object) -> str:
    """One line for a `module:Attr` that names something other than a Protocol, saying what it is (a
    Receiver class named by mistake was constructed, and its constructor's TypeError was the message)."""
    from epfuzz.protocols.base import Receiver

    what = f"the class {obj.__name__}" if isinstance(obj, type) else f"a {type(obj).__name__}"
    hint = ""
    if isinstance(obj, Receiver) or (isinstance(obj, type) and issubclass(obj, Receiver)):
        hint = ": it is a Receiver; name the Protocol whose receiver() returns it"
    return f"{spec!r} is {what}, not an epfuzz Protocol (a Protocol subclass or instance){hint}"


def _where_looked(e: BaseException, mod_name: str, folder: Path, only_there: bool, offers_allow: bool) -> str:
    """Where a plug-in module that is not found was looked for, and how to point there: "No module named 'wts'"
    alone, run from another folder, did not say that the current folder is where it is looked for (pip trial
    item 11). '' when the module was found (a missing import inside it is the module's own)."""
    top = mod_name.split(".")[0]
    if not isinstance(e, ModuleNotFoundError) or e.name not in (top, mod_name) or only_there:
        return ""
    allow = ", or add --allow-plugins FOLDER for the folder it is in" if offers_allow else ""
    return (f" (a plug-in is looked for in the current folder, {folder}, then the installed packages: run epfuzz in "
            f"the folder that holds {top}{allow})")


def _checked_receiver(proto: Protocol, spec: str) -> None:
    """Make the plug-in's receiver() refuse to return anything but a Receiver, naming where it is defined: a
    receiver() that returned None (a missing `return`) failed deep in the emulator as AttributeError 'NoneType'
    object has no attribute 'watch', said as a bug in epfuzz (pip trial item 11). On the instance, so built-ins and
    the class are untouched; an instance that takes no attributes is left as it is."""
    from epfuzz.protocols.base import Receiver, defined_at

    made = proto.receiver
    at = defined_at(made)

    def receiver(scn: Any, layout: Any) -> Receiver:
        rx = made(scn, layout)
        if not isinstance(rx, Receiver):
            got = "None" if rx is None else type(rx).__name__
            raise ProtocolError(f"protocol {spec!r}: receiver() returned {got}, not an epfuzz Receiver{at}")
        return rx

    with contextlib.suppress(AttributeError, TypeError):
        proto.receiver = receiver  # type: ignore[method-assign]


@dataclass
class Registry:
    #: the protocols imported so far, by name (`items` imports the rest first)
    loaded: dict[str, Protocol] = field(default_factory=dict)
    #: built-in protocol name -> the module whose PROTOCOLS defines it, imported on first use
    builtin: dict[str, str] = field(default_factory=dict)
    plugin_files: set[str] = field(default_factory=set)   # source files of the loaded plug-ins
    plugin_roots: set[Path] = field(default_factory=set)  # their top-level module files or package folders
    #: plug-in module -> the modules its import brought in from the folder put on sys.path for it (`_from_folder`),
    #: itself among them when found there: what a guest needs beside it (epfuzz.guest.vm_tree)
    plugin_modules: dict[str, dict[str, str]] = field(default_factory=dict)
    policy: PluginPolicy = field(default_factory=PluginPolicy)  # which plug-ins may be imported

    def add(self, proto: Protocol) -> Protocol:
        if not proto.name:
            raise ValueError("a protocol needs a name")
        self.loaded[proto.name] = proto
        return proto

    @property
    def items(self) -> dict[str, Protocol]:
        """Every protocol, the built-ins first in their table's order, then plug-ins as loaded (the
        dict itself: tests add and remove entries). Imports every built-in family."""
        missing = [n for n in self.builtin if n not in self.loaded]
        for module in dict.fromkeys(self.builtin[n] for n in missing):
            self._import_family(module)
        # families asked for one at a time (`get`) arrive in the order of the asking, which depends on
        # what ran before in the process: the table's order is restored whenever it is not the dict's
        if list(itertools.islice(self.loaded, len(self.builtin))) != list(self.builtin):
            ordered = {n: self.loaded[n] for n in self.builtin}
            ordered |= {n: p for n, p in self.loaded.items() if n not in ordered}
            self.loaded.clear()
            self.loaded.update(ordered)
        return self.loaded

    def known(self, name: str) -> bool:
        """Whether `name` is a built-in or an already loaded protocol (imports nothing)."""
        return name in self.builtin or name in self.loaded

    def _import_family(self, module: str) -> None:
        for proto in importlib.import_module(module).PROTOCOLS:
            self.loaded.setdefault(proto.name, proto)

    def get(self, name: str) -> Protocol:
        """A registered protocol (a built-in's family imported on first use), or a `module:Attr`
        plug-in the policy allows (imported and registered on first use). A name read from a file
        never imports code by itself."""
        if name in self.loaded:
            return self.loaded[name]
        if name in self.builtin:
            self._import_family(self.builtin[name])
            if name not in self.loaded:
                raise HarnessError(f"protocol {name!r}: {self.builtin[name]} defines no protocol of that name")
            return self.loaded[name]
        if ":" in name:
            if name in self.policy.named:
                return self.load_plugin(name)
            folder = self.policy.folder_for(name)
            if folder is None:
                raise self.policy.refusal(name)
            return self._import(name, folder, only_there=True)
        raise InputError(unknown_name("protocol", name, [*self.builtin, *self.loaded], "or module:Attr; "))

    def load_plugin(self, spec: str, folder: Path | None = None) -> Protocol:
        """Import `pkg.module:Attr` (a Protocol instance or class) and register it under `spec`: the
        caller names it (`--protocol`), so it is looked for in the current folder too, or in `folder`
        where the caller says where it is (a corpus merge's libFuzzer child runs in a scratch folder:
        its parent passes the folder it imported the module from, on sys.path for the import alone)."""
        check_spec(spec)
        if spec in self.loaded:
            return self.loaded[spec]
        self.policy.named.add(spec)
        # an --allow-plugins folder holding it counts as well as the current one (found by path: nothing runs)
        return self._import(spec, folder or self.policy.folder_for(spec) or Path.cwd(), only_there=False)

    def import_named(self, spec: str, folder: Path, only_there: bool = False, what: str = "") -> Any:
        """`module:attr`'s object, its module imported with `folder` first on sys.path for the import
        alone, and its files remembered as plug-in code (an exception they raise is blamed on them);
        `only_there`: the module must be found in `folder` (an allowed folder). `what` names it in the
        errors (default: "protocol 'spec'"). The one import path of every plug-in: protocols, and the
        search's --feedback/--moves (epfuzz.search.plugins)."""
        mod_name, attr = check_spec(spec)
        what = what or f"protocol {spec!r}"
        entry = str(folder)
        sys.path.insert(0, entry)
        try:
            root = self._root_of(mod_name.split(".")[0])
            if root is not None:  # before its code runs: an exception at import is blamed on it
                self.plugin_roots.add(root)
            if only_there and (root is None or not inside(str(root), folder)):
                raise InputError(f"{what}: module {mod_name} is not in the allowed folder {folder}")
            before = set(sys.modules)
            mod = importlib.import_module(mod_name)
            if mod_name not in before:
                self.plugin_modules[mod_name] = _from_folder([n for n in list(sys.modules) if n not in before], folder)
            if only_there and not inside(getattr(mod, "__file__", None) or "", folder):
                raise InputError(f"{what}: module {mod_name} was imported already from "
                                 f"{getattr(mod, '__file__', None) or 'built-ins'}, not the allowed folder {folder}")
            obj = getattr(mod, attr, _MISSING)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the plug-in module's own code, run at import
            # an import its own code makes that fails (`import numpyy`, a helper the guest was not given) is a
            # dependency missing where it runs, not a bug in it: exit 2, with the line of that import, where
            # "cannot load ...: No module named 'numpyy'" alone read as if the plug-in were missing (trial 0205)
            at = self.where(e)
            if isinstance(e, ImportError) or (isinstance(e, AttributeError) and not at):
                looked = "" if at else _where_looked(e, mod_name, folder, only_there, self.policy.offers_allow)
                raise InputError(f"cannot load {what}: {e}{at.replace(' (at ', ' (imported at ', 1)}{looked}") from None
            raise ProtocolError(f"cannot import {what}: {describe(e)}{self.where(e)}") from None
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)
        if obj is _MISSING:  # Python's "has no attribute" alone left a misspelt class name to be found by eye
            names = [n for n in vars(mod) if not n.startswith("_")]
            raise InputError(f"cannot load {what}: module {mod_name!r} has no attribute {attr!r}"
                             f"{did_you_mean(attr, names)}")
        file = getattr(mod, "__file__", None)
        if file:
            self.plugin_files.add(os.path.realpath(file))
        return obj

    def _import(self, spec: str, folder: Path, only_there: bool) -> Protocol:
        """Import and construct a protocol plug-in (import_named), registered under `spec`."""
        obj = self.import_named(spec, folder, only_there)
        if isinstance(obj, type) and not issubclass(obj, Protocol):  # not constructed: its constructor is no
            raise InputError(_not_a_protocol(spec, obj))             # protocol's (a Receiver's wants a layout)
        try:
            proto = obj() if isinstance(obj, type) else obj
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's constructor: say so in one line
            raise ProtocolError(f"cannot construct protocol {spec!r}: {describe(e)}{self.where(e)}") from None
        if not isinstance(proto, Protocol):
            raise InputError(_not_a_protocol(spec, proto))
        from epfuzz.protocols.preflight import expect_rule, fields

        fields(proto, spec)  # a misspelt pin or signature knob, named now rather than at the first finding
        expect_rule(proto, spec)  # so is a misspelt preset in its `expect`
        _checked_receiver(proto, spec)
        self.loaded[spec] = proto
        return proto

    @staticmethod
    def _root_of(top: str) -> Path | None:
        """The file or package folder of top-level module `top` on the current sys.path (found, not
        run); None for a module of epfuzz itself or one with no file (built in)."""
        spec = importlib.machinery.PathFinder.find_spec(top)
        if spec is None:
            return None
        if spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations))).resolve()
        elif spec.origin and spec.origin not in ("built-in", "frozen"):
            root = Path(spec.origin).resolve()
        else:
            return None
        return None if inside(str(root), EPFUZZ_ROOT) or inside(str(EPFUZZ_ROOT), root) else root

    def is_plugin_file(self, file: str) -> bool:
        """Whether a source file is plug-in code: a loaded plug-in's module, or in its package."""
        real = os.path.realpath(file)
        return real in self.plugin_files or any(inside(real, r) for r in self.plugin_roots)

    def where(self, exc: BaseException) -> str:
        """' (at FILE:LINE, in FUNC)' of the innermost frame of `exc` inside a loaded plug-in's
        source, or '' when none is: an exception raised by the user's code is the user's bug, and
        the CLI says so instead of blaming epfuzz."""
        return self.where_in((fr.filename, fr.lineno, fr.name) for fr in traceback.extract_tb(exc.__traceback__))

    def where_in(self, frames: Iterable[tuple[str, int | None, str]]) -> str:
        """`where` for (file, line, function) frames, innermost last: also what a campaign reads
        back from a job's printed traceback."""
        hit = ""
        for file, line, func in frames:
            if self.is_plugin_file(file):
                hit = f" (at {file}:{line}, in {func})"
        return hit

    def zoo(self, names: Iterable[str]) -> tuple[ZooRow, ...]:
        """One row per pattern of the protocols `names`, by number; each pattern must have one buggy
        and one fixed protocol."""
        sides: dict[Pattern, dict[str, str]] = {}
        for name in names:
            proto = self.get(name)
            if proto.pattern is None:
                continue
            side = sides.setdefault(proto.pattern, {})
            if proto.expect not in ("finding", "clean"):
                raise ValueError(f"pattern {proto.pattern.number}: {name} needs one verdict for every scenario")
            if proto.expect in side:
                raise ValueError(f"pattern {proto.pattern.number}: {side[proto.expect]} and {name} are "
                                 f"both expected {proto.expect!r}")
            side[proto.expect] = name
        rows = []
        for pat, side in sides.items():
            if set(side) != {"finding", "clean"}:
                raise ValueError(f"pattern {pat.number} needs a buggy and a fixed protocol, has {side}")
            rows.append(ZooRow(pat.number, pat.title, side["finding"], side["clean"]))
        return tuple(sorted(rows))
