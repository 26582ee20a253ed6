"""Every op a sender posts must address memory the layout has.

An op outside its region would land in another region's bytes (or nowhere) and
the run would report it as a finding about ordering, exit 1, when it is a bug in
the plug-in's arithmetic. Checking each op before any backend acts on it turns
that into a `ProtocolError` (exit 3) that names the op: the verbs runner checks
the programs before posting; the emulator's requester checks each op as it reads
its fields (`OutsideLayout`), and the build then runs `check_programs` to name
the first op outside in program order, as a check before posting would have.

Where the NIC writes for a channel's completion: CQ entry and recv entry
`channel * max_signals + slot` (16 bytes each), so `slot` must be below
`layout.max_signals` and the posting channel below `layout.num_channels`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from epfuzz.infra.errors import ProtocolError
from epfuzz.ir import ops
from epfuzz.protocols.base import Layout, defined_at

#: the op classes each rule applies to (tuples: an `A | B` in `isinstance` builds a types.UnionType per call)
_SPAN_OPS = (ops.Write, ops.WriteImm, ops.Read, ops.CeCopy)
_WORD_OPS = (ops.WriteValue, ops.AtomicAdd, ops.CeValue)
_SRC_OPS = (ops.SrcStore, ops.SrcClear)

NO_SPAN: Final = 0  # no receiver bytes (GPU-side ops, Flush, Spin, Send: its entry is the slot's)
SPAN: Final = 1     # [offset, offset + length) of `region`
WORD: Final = 2     # the 8-byte word at `offset` of `region`
NO_SLOT: Final = 0
CQ_SLOT: Final = 1  # `cq_slot` names the channel's CQ entry (WriteImm)
SLOT: Final = 2     # `slot` names the channel's recv and CQ entry (Send)


class Shape:
    """Which of the layout's rules an op's class is subject to, and through which of its fields: decided once
    per exact type (`shape_of`) by the isinstance tests the check made per op, so that `_problem` alone states
    the rules and a check per op costs one dict hit plus the fields it reads (issue 31)."""

    __slots__ = ("span", "src", "aligned", "slot")
    span: int      # NO_SPAN, SPAN or WORD
    src: bool      # [offset, offset + length) of the send buffer, which mirrors the data region (a SrcStore's)
    aligned: bool  # the word must be 8-byte aligned (an atomic)
    slot: int      # NO_SLOT, CQ_SLOT or SLOT

    def __init__(self, op: object) -> None:
        self.span = SPAN if isinstance(op, _SPAN_OPS) else WORD if isinstance(op, _WORD_OPS) else NO_SPAN
        self.src = isinstance(op, _SRC_OPS)
        self.aligned = isinstance(op, ops.AtomicAdd)
        self.slot = CQ_SLOT if isinstance(op, ops.WriteImm) else SLOT if isinstance(op, ops.Send) else NO_SLOT


_SHAPES: dict[type, Shape] = {}


def shape_of(op: object) -> Shape:
    """`op`'s `Shape`, by its exact type (a subclass, a plug-in's op, is classified as `isinstance` has it)."""
    tp = type(op)
    s = _SHAPES.get(tp)
    if s is None:
        s = _SHAPES[tp] = Shape(op)
    return s


def _problem(op: ops.Op, shape: Shape, channel: int, max_signals: int, num_channels: int,
             sizes: dict[str, int]) -> str | None:
    """Why `op` (of `shape`) is outside the layout (`sizes`: the layout's, made once per check), or None."""
    o: Any = op  # its fields are those of its shape, which mypy cannot narrow by
    if shape.span != NO_SPAN:
        region = o.region
        off: int = o.offset
        length: int = o.length if shape.span == SPAN else 8
        size = sizes.get(region)
        if size is None:
            return f"region {region!r} is none of {sorted(sizes)}"
        if off < 0 or length < 0 or off + length > size:
            return f"bytes [{off}, {off + length}) are outside region {region!r} of {size} bytes"
    if shape.src:  # source bytes mirror the data region's (a Write's offsets)
        soff: int = o.offset
        slen: int = o.length
        dsize = sizes.get(ops.DATA, 0)
        if soff < 0 or slen < 0 or soff + slen > dsize:
            return f"source bytes [{soff}, {soff + slen}) are outside the data region of {dsize} bytes"
    if shape.aligned:
        aoff: int = o.offset
        if aoff % 8:
            return f"an atomic needs an 8-byte aligned offset, not {aoff}"
    if shape.slot != NO_SLOT:
        slot: int = o.cq_slot if shape.slot == CQ_SLOT else o.slot
        if not 0 <= slot < max_signals:
            return f"CQ/recv entry {slot} of channel {channel} is outside [0, {max_signals}) (layout.max_signals)"
        if channel >= num_channels:
            return f"a completion of channel {channel}, but the layout has {num_channels} channels"
    return None


class OutsideLayout(Exception):
    """An op the requester found outside the layout as it read the op's fields (`epfuzz.sim.sendq`, issue 31:
    one read of each field, where a check before posting read them once more): the builder then runs
    `check_programs`, which raises the `ProtocolError` naming the first such op in program order."""


def span_fits(sizes: dict[str, int], region: str, off: int, length: int) -> bool:
    """Whether [off, off + length) lies in `region` of the layout (`sizes`): `_problem`'s span rule."""
    size = sizes.get(region)
    return size is not None and off >= 0 and length >= 0 and off + length <= size


def require_fits(op: ops.Op, channel: int, max_signals: int, num_channels: int, sizes: dict[str, int]) -> None:
    """Raise `OutsideLayout` unless `op` (of any class) keeps to the layout: every rule of `check_programs`."""
    if _problem(op, shape_of(op), channel, max_signals, num_channels, sizes) is not None:
        raise OutsideLayout


def check_programs(programs: Sequence[Sequence[ops.Op]], layout: Layout, protocol: str, epoch: int,
                   sizes: dict[str, int] | None = None, sender: object = None) -> None:
    """Raise `ProtocolError` for the first op that addresses outside `layout`; `sizes` is `layout.sizes` where
    the caller has it (`build_form` reads that interpreted property once per form, not once per epoch here and
    once more for the form's memory images). `protocol` is the name the user gave (a plug-in's `module:Attr`,
    not its `name` attribute), `sender` the method that made the programs: the error names both (new-user
    trial item 6; an op is a plain value, so the sender that built it is the nearest place in the plug-in to
    name)."""
    if sizes is None:
        sizes = layout.sizes  # a property that builds a dict: once, not per op; the layout's ints likewise
    max_signals, num_channels = layout.max_signals, layout.num_channels
    shapes = _SHAPES
    for c, prog in enumerate(programs):
        for i, op in enumerate(prog):
            shape = shapes.get(type(op))
            if shape is None:
                shape = shape_of(op)
            why = _problem(op, shape, c, max_signals, num_channels, sizes)
            if why is not None:
                raise ProtocolError(f"protocol {protocol!r}, epoch {epoch}, channel {c}, op {i} "
                                    f"{op!r}: {why}{defined_at(sender)}")
