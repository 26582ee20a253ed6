"""A protocol with edits applied: a wrapper around the original, which stays untouched.

The wrapper delegates layout, sender and receiver to the original and applies each edit's
transform on the way out, so the repaired protocol runs on every backend that runs the
original. `scenario` applies the edits' pinned fields to a scenario: the repaired protocol
pins them (`fixed`), as the fixed protocols of the zoo pin theirs.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout, Protocol, Receiver
from epfuzz.repair.catalogue import Edit

_ATTRS = ("reset_signals", "poison", "release_at_accept", "flush_on_accept", "targets", "signature_knobs",
          "pattern", "sources")


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
    state = (type(rx).__name__, tuple(sorted((k, repr(v)) for k, v in receiver_attrs(rx).items())))
    return (tuple(tuple(tuple(p) for p in proto.sender(scn, lay, e)) for e in range(scn.payload.epochs)),
            tuple(tuple(proto.epoch_prologue(scn, lay, e)) for e in range(scn.payload.epochs)),
            tuple(repr(getattr(proto, a)) for a in ("reset_signals", "poison", "release_at_accept",
                                                    "flush_on_accept", "targets")),
            state)


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
