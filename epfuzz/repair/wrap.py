"""A protocol with edits applied: a wrapper around the original, which stays untouched.

The wrapper delegates layout, sender and receiver to the original and applies each edit's
transform on the way out, so the repaired protocol runs on every backend that runs the
original. `scenario` applies the edits' pinned fields to a scenario: the repaired protocol
pins them (`fixed`), as the fixed protocols of the zoo pin theirs.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Sequence
from typing import Any

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout, Protocol, Receiver
from epfuzz.repair.catalogue import Edit

#: the protocol's class-level settings the wrapper carries over (`Protocol`'s): a setting left out took the base
#: class's default, so a repaired `stale_cache` ran without its receiver's L2 lines (rx_map) and any edit, one
#: that changed nothing included, was "proven" (review, 2026-12-05; tests/repair/test_catalogue.py)
_ATTRS = ("reset_signals", "poison", "release_at_accept", "flush_on_accept", "flush_before_poll", "rx_map",
          "targets", "signature_knobs", "pattern", "sources", "home_preset")


class Repaired(Protocol):
    """`base` with `edits` applied, in order."""

    def __init__(self, base: Protocol, edits: Sequence[Edit]) -> None:
        self.base, self.edits = base, tuple(edits)
        self.name = base.name
        self.doc = f"{base.doc} [repaired: {', '.join(e.name for e in self.edits)}]"
        for attr in _ATTRS:
            setattr(self, attr, getattr(base, attr))
        self.fixed = dict(base.fixed)
        for e in self.edits:
            self.fixed.update(e.scenario)
            for attr, value in e.attrs.items():
                setattr(self, attr, value)
        self.expect = "clean"

    def scenario(self, scn: Scenario) -> Scenario:
        """`scn` with the edits' pinned fields set. Not reloaded through the codec: that would pin the
        original protocol's values again (the scenario keeps the original's name)."""
        for e in self.edits:
            for path, value in e.scenario.items():
                scn = scn.with_path(path, value)
        return scn

    def layout(self, scn: Scenario) -> Layout:
        return self.base.layout(scn)

    def sender(self, scn: Scenario, layout: Layout, epoch: int) -> list[list[ops.Op]]:
        programs = self.base.sender(scn, layout, epoch)
        for e in self.edits:
            if e.ops is not None:
                programs = e.ops(programs, scn, layout, self.base)
        return programs

    def receiver(self, scn: Scenario, layout: Layout) -> Receiver:
        opts = {e.receiver_option: True for e in self.edits if e.receiver_option}
        if not opts:
            return self.base.receiver(scn, layout)
        base: Any = self.base
        return base.receiver_cls(scn, layout, **{**base.receiver_opts, **opts})

    def epoch_prologue(self, scn: Scenario, layout: Layout, epoch: int) -> list[tuple[str, int, int, bool]]:
        entries = self.base.epoch_prologue(scn, layout, epoch)
        if any(e.ordered_prologue for e in self.edits):
            return [(region, off, value, True) for region, off, value, _ in entries]
        return entries


def observable(scn: Scenario, proto: Protocol) -> tuple[Any, ...]:
    """What a protocol does on `scn`: its ops per epoch, its prologues, its receiver attributes and the
    receiver's class and options. Two protocols equal here run alike on `scn` (an edit that leaves
    this unchanged does not apply to the case)."""
    lay = proto.layout(scn)
    rx = proto.receiver(scn, lay)
    state = (type(rx).__name__, tuple(sorted((k, stable_repr(v)) for k, v in receiver_attrs(rx).items())))
    return (tuple(tuple(tuple(p) for p in proto.sender(scn, lay, e)) for e in range(scn.payload.epochs)),
            tuple(tuple(proto.epoch_prologue(scn, lay, e)) for e in range(scn.payload.epochs)),
            tuple(stable_repr(getattr(proto, a)) for a in ("reset_signals", "poison", "release_at_accept",
                                                           "flush_on_accept", "flush_before_poll", "rx_map",
                                                           "targets")),
            state)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable_repr(v: Any, depth: int = 3) -> str:
    """`repr` without memory addresses: a function by its code, place and the values it closes over (a receiver's
    `ready` lambda read `<function ... at 0x...>`, so whether an edit counted as applying depended on where the
    allocator put the lambda: `epfuzz repair` listed 8 or 3 edits for one finding, review of issue 31); any other
    object's `at 0x...` is dropped."""
    if depth > 0:
        if isinstance(v, types.MethodType):
            return f"<method {stable_repr(v.__func__, depth - 1)} of {type(v.__self__).__qualname__}>"
        if isinstance(v, functools.partial):
            return (f"<partial {stable_repr(v.func, depth - 1)} {stable_repr(v.args, depth - 1)} "
                    f"{stable_repr(v.keywords, depth - 1)}>")
        if isinstance(v, types.FunctionType):
            code = v.__code__
            cells = tuple(stable_repr(c.cell_contents, depth - 1) for c in v.__closure__ or ())
            return (f"<function {v.__module__}.{v.__qualname__} {code.co_filename}:{code.co_firstlineno} "
                    f"{code.co_code.hex()} {stable_repr(code.co_consts, depth - 1)} closes over {cells} "
                    f"defaults {stable_repr(v.__defaults__, depth - 1)}>")
        if isinstance(v, (tuple, list)):
            return type(v).__name__ + "(" + ", ".join(stable_repr(x, depth - 1) for x in v) + ")"
    return _ADDRESS.sub("", repr(v))


def receiver_attrs(rx: Any) -> dict[str, Any]:
    """A receiver's attributes: its `__dict__`, and for a class mypyc compiled (the built-in receivers, issue 31)
    the native attributes it keeps outside it, which the class exposes as descriptors (`vars` alone missed
    them, and a receiver option's edit looked like no change: the repair dropped it)."""
    out: dict[str, Any] = {}
    for klass in reversed(type(rx).__mro__):
        for name, d in vars(klass).items():
            if isinstance(d, types.GetSetDescriptorType) and not name.startswith("__"):
                out[name] = getattr(rx, name, None)
    out.update(vars(rx) if hasattr(rx, "__dict__") else {})
    return out
