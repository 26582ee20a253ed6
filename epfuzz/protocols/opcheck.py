"""Every op a sender posts must address memory the layout has.

An op outside its region would land in another region's bytes (or nowhere) and
the run would report it as a finding about ordering, exit 1, when it is a bug in
the plug-in's arithmetic. Checking once, before any backend interprets the ops,
turns that into a `ProtocolError` (exit 3) that names the op.

Where the NIC writes for a channel's completion: CQ entry and recv entry
`channel * max_signals + slot` (16 bytes each), so `slot` must be below
`layout.max_signals` and the posting channel below `layout.num_channels`.
"""

from __future__ import annotations

from collections.abc import Sequence

from epfuzz.infra.errors import ProtocolError
from epfuzz.ir import ops
from epfuzz.protocols.base import Layout

#: the op classes each check applies to, as tuples built once: an `A | B` in `isinstance` builds a
#: types.UnionType on every call (about five times the cost of the check itself, per op, compiled or not)
_SPAN_OPS = (ops.Write, ops.WriteImm, ops.Read, ops.CeCopy)
_WORD_OPS = (ops.WriteValue, ops.AtomicAdd, ops.CeValue)
_SRC_OPS = (ops.SrcStore, ops.SrcClear)


def _span(op: ops.Op) -> tuple[str, int, int] | None:
    """(region, offset, length) an op writes (or a READ reads) at the receiver, or None for GPU-side ops."""
    if isinstance(op, _SPAN_OPS):
        return op.region, op.offset, op.length
    if isinstance(op, _WORD_OPS):
        return op.region, op.offset, 8
    return None


def _problem(op: ops.Op, channel: int, layout: Layout, sizes: dict[str, int]) -> str | None:
    """Why `op` is outside `layout` (`sizes`: the layout's, made once per check), or None."""
    span = _span(op)
    if span is not None:
        region, off, length = span
        if region not in sizes:
            return f"region {region!r} is none of {sorted(sizes)}"
        if off < 0 or length < 0 or off + length > sizes[region]:
            return f"bytes [{off}, {off + length}) are outside region {region!r} of {sizes[region]} bytes"
    if isinstance(op, _SRC_OPS):  # source bytes mirror the data region's (a Write's offsets)
        size = sizes.get(ops.DATA, 0)
        if op.offset < 0 or op.length < 0 or op.offset + op.length > size:
            return f"source bytes [{op.offset}, {op.offset + op.length}) are outside the data region of {size} bytes"
    if isinstance(op, ops.AtomicAdd) and op.offset % 8:
        return f"an atomic needs an 8-byte aligned offset, not {op.offset}"
    slot = op.cq_slot if isinstance(op, ops.WriteImm) else op.slot if isinstance(op, ops.Send) else None
    if slot is not None:
        if not 0 <= slot < layout.max_signals:
            return (f"CQ/recv entry {slot} of channel {channel} is outside [0, {layout.max_signals}) "
                    "(layout.max_signals)")
        if channel >= layout.num_channels:
            return f"a completion of channel {channel}, but the layout has {layout.num_channels} channels"
    return None


def _fits(op: ops.Op, channel: int, layout: Layout, sizes: dict[str, int]) -> bool:
    """True where `_problem(op, ...)` is None for the ops senders post most (their exact classes: data
    writes, signal words, completions, flushes); False sends the op to `_problem`, which decides and
    words the error. One `type(op) is` test and the op's own fields instead of `_problem`'s half-dozen
    isinstance tests per op, which were most of a check (issue 31: about as much as making the op);
    tests/zoo/test_opcheck.py checks it against `_problem` for random ops in and out of range."""
    t = type(op)
    if t is ops.Write:
        w: ops.Write = op  # type: ignore[assignment]
        size = sizes.get(w.region, -1)
        return w.offset >= 0 and w.length >= 0 and w.offset + w.length <= size
    if t is ops.AtomicAdd:
        a: ops.AtomicAdd = op  # type: ignore[assignment]
        size = sizes.get(a.region, -1)
        return 0 <= a.offset <= size - 8 and a.offset % 8 == 0
    if t is ops.WriteValue:
        v: ops.WriteValue = op  # type: ignore[assignment]
        size = sizes.get(v.region, -1)
        return 0 <= v.offset <= size - 8
    if t is ops.Flush or t is ops.Spin:
        return True
    if t is ops.WriteImm:
        m: ops.WriteImm = op  # type: ignore[assignment]
        size = sizes.get(m.region, -1)
        return (m.offset >= 0 and m.length >= 0 and m.offset + m.length <= size
                and 0 <= m.cq_slot < layout.max_signals and channel < layout.num_channels)
    if t is ops.Send:
        d: ops.Send = op  # type: ignore[assignment]
        return 0 <= d.slot < layout.max_signals and channel < layout.num_channels
    return False


def check_programs(programs: Sequence[Sequence[ops.Op]], layout: Layout, protocol: str, epoch: int) -> None:
    """Raise `ProtocolError` for the first op that addresses outside `layout`."""
    sizes = layout.sizes  # a property that builds a dict: once, not per op
    for c, prog in enumerate(programs):
        for i, op in enumerate(prog):
            if _fits(op, c, layout, sizes):
                continue
            why = _problem(op, c, layout, sizes)
            if why is not None:
                raise ProtocolError(f"protocol {protocol!r}, epoch {epoch}, channel {c}, op {i} "
                                    f"{op!r}: {why}")
