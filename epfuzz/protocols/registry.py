"""Protocols by name, plug-ins loaded on first use, and the bug-zoo table derived from them.

The zoo table is read off the protocols' `pattern` links (a buggy and a fixed
protocol sharing one `Pattern`), so adding a pattern is adding its two protocols:
no second list of names to keep in step.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from epfuzz.errors import InputError, ProtocolError
from epfuzz.protocols.base import Pattern, Protocol


class ZooRow(NamedTuple):
    """One bug-zoo pattern: its number, title, and the names of its buggy and fixed protocols."""

    number: int
    title: str
    bad: str
    fixed: str


@dataclass
class Registry:
    items: dict[str, Protocol] = field(default_factory=dict)
    plugin_files: set[str] = field(default_factory=set)   # source files of the loaded plug-ins

    def add(self, proto: Protocol) -> Protocol:
        if not proto.name:
            raise ValueError("a protocol needs a name")
        self.items[proto.name] = proto
        return proto

    def get(self, name: str) -> Protocol:
        """A registered protocol, or a `module:Attr` plug-in (loaded and registered on first use)."""
        if name in self.items:
            return self.items[name]
        if ":" in name:
            return self.load_plugin(name)
        raise InputError(f"unknown protocol {name!r}; known: {', '.join(self.items)} (or module:Attr)")

    def load_plugin(self, spec: str) -> Protocol:
        """Import `pkg.module:Attr` (a Protocol instance or class) and register it under `spec`."""
        mod_name, _, attr = spec.partition(":")
        if os.getcwd() not in sys.path:  # user modules live beside the user, not in site-packages
            sys.path.insert(0, os.getcwd())
        try:
            mod = importlib.import_module(mod_name)
            obj = getattr(mod, attr)
        except (ImportError, AttributeError) as e:
            raise InputError(f"cannot load protocol {spec!r}: {e}") from None
        if getattr(mod, "__file__", None):
            self.plugin_files.add(os.path.realpath(mod.__file__))
        try:
            proto = obj() if isinstance(obj, type) else obj
        except Exception as e:  # noqa: BLE001 - the user's constructor: say so in one line
            raise ProtocolError(f"cannot construct protocol {spec!r}: {type(e).__name__}: {e}"
                                f"{self.where(e)}") from None
        if not isinstance(proto, Protocol):
            raise InputError(f"{spec!r} is not an epfuzz Protocol")
        self.items[spec] = proto
        return proto

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
            if os.path.realpath(file) in self.plugin_files:
                hit = f" (at {file}:{line}, in {func})"
        return hit

    def zoo(self) -> tuple[ZooRow, ...]:
        """One row per pattern, by number; each pattern must have one buggy and one fixed protocol."""
        sides: dict[Pattern, dict[str, str]] = {}
        for name, proto in self.items.items():
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
