"""The sender-side source layer in the requester: which payload packets the NIC read from a send buffer that
did not (or no longer) hold the payload (`epfuzz.model.source`). Only a sender with source ops pays for it."""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.model.ordering import NO_PROXY_FENCE
from epfuzz.model.source import CLEAR, FLUSH, FLUSH_RO, SOURCE_CLAUSES, STORE, SrcEvent, nic_read
from epfuzz.sim.packets import Packet, PacketKind, Wr

_WRITE, _IMM = PacketKind.WRITE, PacketKind.IMM


def gpu_op(op: ops.SrcStore | ops.SrcFlush | ops.SrcClear | ops.ProxyFence, channel: int, index: int, t: int,
           src: list[SrcEvent], wrs: list[Wr]) -> None:
    """A GPU-only op reached by `channel` (its op `index`) at time `t`: a send-buffer access joins `src`; a
    ProxyFence marks the channel's earlier WRs as proxy-fenced there (`ordering.nvlink_pass`)."""
    if isinstance(op, ops.ProxyFence):
        for w in wrs:
            if w.channel == channel and w.proxy_fence == NO_PROXY_FENCE:
                w.proxy_fence = index
    else:
        src.append(source_event(op, channel, t))


def source_event(op: ops.SrcStore | ops.SrcFlush | ops.SrcClear, channel: int, t: int) -> SrcEvent:
    """The GPU's access to the send buffer as the source layer sees it."""
    if isinstance(op, ops.SrcFlush):
        return SrcEvent(t, channel, FLUSH_RO if op.relaxed else FLUSH)
    return SrcEvent(t, channel, STORE if isinstance(op, ops.SrcStore) else CLEAR, op.offset, op.length)


def mark_stale(wrs: list[Wr], wr_base: int, pkts: list[Packet], src: list[SrcEvent]) -> None:
    """Mark each payload packet whose source bytes the NIC's DMA read (when the packet is made, `ready`)
    may have seen other than the payload (`epfuzz.model.source.nic_read`)."""
    for p in pkts:
        if p.length and p.kind in (_WRITE, _IMM) and p.batch < 0:  # a copy engine's copy is no NIC DMA read
            op = wrs[p.wr - wr_base].op
            if isinstance(op, ops.Write) and op.tma:  # the GPU's own store over NVLink (mixed plane), no NIC read
                continue
            shift = op.shift if isinstance(op, ops.Write) else 0
            clause = nic_read(src, p.off + shift, p.off + shift + p.length, p.ready)
            if SOURCE_CLAUSES[clause].stale:
                p.stale = clause
