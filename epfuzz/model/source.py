"""Sender-side visibility: what the NIC's DMA read of a send buffer sees of the GPU's stores to it.

The PCIe table (`epfuzz.model.ordering`) orders what lands at the receiver; this layer is the mirror
image, before the first packet leaves. A GPU kernel writes the send buffer; its stores sit in the
GPU's L2 until written back; the NIC (or a CPU proxy that posts for the GPU) reads the buffer by DMA
when it builds each packet. ROCm aorta #205 (RCCL on MI355X with AMD AINIC): the proxy posted before
the L2 writeback, the NIC sent zeros that passed the iCRC, every receiver got the same zeros. The fix
needed both a GPU-side flush before the post (`NCCL_GDR_FLUSH_DISABLE=0`) and that flush without
relaxed ordering (`RCCL_GDR_FLUSH_GPU_MEM_NO_RELAXED_ORDERING=0`: "relaxed ordering on the flush
reintroduces the race"). The same layer says what a rewrite of the send buffer does to a read still
to come: DeepEP #677's follow-up (5c4f2b8) and mori #404 are quiets that returned before the NIC had
read the buffer that the kernel then cleared.

The model is a possibility model, as the `nvlink` clauses are: a store not yet flushed *may* be unseen,
a rewrite already issued *may* be seen, and the run takes the bad possibility (the packet carries
zeros, `TlpAction.STALE`). The ops are `SrcStore`, `SrcFlush`, `SrcClear` (`epfuzz.ir.ops`); each
clause below is pinned by a test in tests/rules/test_source_rules.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

STORE, FLUSH, FLUSH_RO, CLEAR = "store", "flush", "flush-ro", "clear"


@dataclass(frozen=True)
class SourceClause:
    name: str
    stale: bool          # whether the NIC's read may carry other bytes than the epoch's payload
    source: str
    rule: str


SOURCE_CLAUSES: dict[str, SourceClause] = {c.name: c for c in (
    SourceClause("SRC-assumed", False, "every protocol before this layer; DeepEP/NCCL senders whose buffer is "
                 "produced by an earlier kernel (a kernel boundary writes L2 back)",
                 "no GPU store to these bytes this epoch: the send buffer was written back before the epoch"),
    SourceClause("SRC-flushed", False, "ROCm aorta #205 fix (NCCL_GDR_FLUSH_DISABLE=0 with "
                 "RCCL_GDR_FLUSH_GPU_MEM_NO_RELAXED_ORDERING=0)",
                 "a strict GPU-side flush by the storing channel after its stores and before the NIC's read: "
                 "the read sees them"),
    SourceClause("SRC-unflushed", True, "ROCm aorta #205 (AINIC-SDC-001: the proxy posted before the L2 "
                 "writeback, the NIC DMA read stale zeros)",
                 "stores this epoch with no flush of the storing channel between them and the NIC's read (or "
                 "the read comes before the stores): the read may see the buffer's old bytes"),
    SourceClause("SRC-flush-ro", True, "ROCm aorta #205 (\"relaxed ordering on the flush reintroduces the "
                 "race\")", "the only flush between the stores and the read was issued with relaxed ordering: "
                 "it may pass the writeback, so it orders nothing"),
    SourceClause("SRC-overwrite", True, "DeepEP #677 follow-up 5c4f2b8, mori #404",
                 "the GPU rewrote (cleared) the bytes before the NIC's read: the read may see the new bytes"),
    SourceClause("SRC-overwrite-later", False, "DeepEP #677 follow-up 5c4f2b8 (the drain it needs)",
                 "a rewrite issued after the NIC's read (a quiet that waited for the WR's completion): the "
                 "packet carried the bytes as they were"),
)}


@dataclass(frozen=True)
class SrcEvent:
    """One GPU access to the send buffer, at the time its channel reached it."""

    time: int
    channel: int
    kind: str            # STORE, FLUSH, FLUSH_RO or CLEAR
    offset: int = 0
    length: int = 0


def _overlaps(e: SrcEvent, start: int, end: int) -> bool:
    return e.offset < end and start < e.offset + e.length


def _committed(e: SrcEvent, events: Sequence[SrcEvent], t: int, kind: str = FLUSH) -> bool:
    """Whether a flush of `kind` by `e`'s channel falls between `e` and the read at `t`."""
    return any(f.kind == kind and f.channel == e.channel and e.time <= f.time <= t for f in events)


def nic_read(events: Sequence[SrcEvent], start: int, end: int, t: int) -> str:
    """The clause deciding what a DMA read of source bytes [start, end) at time `t` may see.

    The read may see the latest write (store or clear) committed by a strict flush, or any write issued
    after it up to `t`; before any committed write, the bytes as they were before the epoch (the
    payload, unless the epoch stores these bytes: then the old contents)."""
    writes = [e for e in events if e.kind in (STORE, CLEAR) and _overlaps(e, start, end)]
    if not writes:
        return "SRC-assumed"
    seen = [e for e in writes if e.time <= t]
    last = max((i for i, e in enumerate(seen) if _committed(e, events, t)), default=-1)
    if any(e.kind == CLEAR for e in seen[max(last, 0):]):
        return "SRC-overwrite"
    if last >= 0:  # a committed store, and only stores of the same payload after it
        return "SRC-flushed"
    stores = [e for e in writes if e.kind == STORE]
    if stores:  # nothing committed: the old contents are possible (the epoch stores these bytes)
        return "SRC-flush-ro" if any(_committed(e, events, t, FLUSH_RO) for e in stores) else "SRC-unflushed"
    return "SRC-overwrite-later"  # only clears, all after the read
