"""The verbs-like vocabulary protocols are written in.

A protocol's sender is a list of these per channel (a GPU warp); every backend
interprets the same list: `sim` turns it into packets and TLPs, `verbs` into
ibv_post_send calls, `cuda` into stores and fences. Keeping the vocabulary this
small is what lets one protocol description run unchanged on all three.

Addresses are (region, offset). Regions are named buffers on the receiver:
`data` (token slots), `signal` (8-byte words), `cq` (16-byte completion entries,
written by the NIC), `recv` (SEND landing buffers). CQ and recv entries are per
channel: entry `slot` of channel `c` is at `(c * layout.max_signals + slot) * 16`.
An op outside the layout is a `ProtocolError` (exit 3) naming it
(`epfuzz.protocols.opcheck`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from epfuzz.ir.slotinit import fast_init

# Final: the compiled core reads these as literals, not as an attribute of this plain-Python module per use
DATA: Final = "data"
SIGNAL: Final = "signal"
CQ: Final = "cq"
RECV: Final = "recv"
REGIONS = (DATA, SIGNAL, CQ, RECV)


@dataclass(frozen=True, slots=True)
class Write:
    """RDMA WRITE of this epoch's payload bytes for [offset, offset+length) of `region`.

    `shift` moves the source: the bytes sent are those the receiver expects at
    offset+shift (a sender that computes a wrong slot, bug pattern 10).

    `tma=True` is a TMA bulk store (`cp.async.bulk`, the async proxy) under the `nvlink` preset: a
    generic-proxy release does not order it, a `ProxyFence` does (NCCL 3f29db27, clause NV-async-proxy).
    Under the RDMA presets it is an RDMA WRITE as any.
    """

    qp: int
    region: str
    offset: int
    length: int
    fence: bool = False
    shift: int = 0
    tma: bool = False


@dataclass(frozen=True, slots=True)
class WriteValue:
    """RDMA WRITE of a 64-bit value (a flag or a tail) into `region` at `offset`. `strong=True`: the WQE carries
    the strong-ordering fence flag, placed without RO whatever the MR (`epfuzz.model.device`, UCX #11721)."""

    qp: int
    region: str
    offset: int
    value: int
    fence: bool = False
    strong: bool = False


@dataclass(frozen=True, slots=True)
class AtomicAdd:
    """RDMA ATOMIC FETCH_AND_ADD on a 64-bit word: DeepEP's "VA signal". `strong=True` as `WriteValue`'s."""

    qp: int
    region: str
    offset: int
    delta: int
    fence: bool = False
    strong: bool = False


@dataclass(frozen=True, slots=True)
class WriteImm:
    """RDMA WRITE_WITH_IMM (length may be 0): the receiver learns `imm` from CQ entry `cq_slot` of
    the posting channel, at byte `(channel * layout.max_signals + cq_slot) * 16` of `cq` (every
    backend places it so; `imm` itself is the protocol's, never routing). `cq_slot` must be below
    `layout.max_signals`."""

    qp: int
    region: str
    offset: int
    length: int
    imm: int
    cq_slot: int
    fence: bool = False


@dataclass(frozen=True, slots=True)
class Send:
    """SEND of a 64-bit value into recv entry `slot` of the posting channel, then a CQE in its CQ
    entry `slot`: both at byte `(channel * layout.max_signals + slot) * 16` of `recv` and `cq`.
    `slot` must be below `layout.max_signals`."""

    qp: int
    value: int
    slot: int
    fence: bool = False


@dataclass(frozen=True, slots=True)
class Read:
    """RDMA READ of [offset, offset+length) of the receiver's `region` into the sender's scratch.

    The responder reads its memory with one MemRd (`epfuzz.model.rdma_read`): it does not pass the
    QP's earlier posted writes (PCIe B2a), so a READ on the data QP is a flush of them; it orders
    nothing on another QP (xQP). A later WR of the QP may take effect before the READ has read
    memory unless it carries `fence` (IBV_SEND_FENCE waits for prior READs and ATOMICs).
    """

    qp: int
    region: str
    offset: int
    length: int
    fence: bool = False


@dataclass(frozen=True, slots=True)
class CeCopy:
    """A copy-engine copy of this epoch's payload bytes for [offset, offset+length) of `region`, in batch
    `batch` (`epfuzz.model.cebatch`): NCCL's zero-SM put, one task of a `cudaMemcpyBatchAsync`.

    `qp` is the lane (stream) the batches are issued on: the scenario's QPs double as copy-engine
    streams for timing, and a protocol uses a lane for copies only. Copies of one batch have no order
    among them; a later batch on the lane starts once the earlier one has completed.
    """

    qp: int
    region: str
    offset: int
    length: int
    batch: int
    fence: bool = False  # never set: a copy engine has no fence indicator (the field keeps WR ops alike)


@dataclass(frozen=True, slots=True)
class CeValue:
    """A copy-engine copy of an 8-byte value (a signal: NCCL's sequence number) into `region` at `offset`,
    in batch `batch` on lane `qp` (`CeCopy`)."""

    qp: int
    region: str
    offset: int
    value: int
    batch: int
    fence: bool = False


@dataclass(frozen=True, slots=True)
class Spin:
    """GPU clock spin before the next post."""

    ns: int


@dataclass(frozen=True, slots=True)
class Flush:
    """Wait until every WR posted so far on `qp` has completed *locally* (ACK seen).

    Local completion says the responder NIC has the bytes, not that they are
    visible in memory: that gap is bug patterns 4 and 9.

    `stale=True` is a quiet that drains to a stale frontier: to the QP's post index as it was
    before this channel's own first WR on the QP in the epoch (a snapshot taken by another warp,
    or an index the posting path no longer advances), so it waits for none of the channel's own
    WRs (mori #404, DeepEP #677 follow-up 5c4f2b8; clause `quiet-stale-frontier`).
    """

    qp: int
    stale: bool = False


@dataclass(frozen=True, slots=True)
class ProxyFence:
    """`cp.async.bulk.wait_group 0` then `fence.proxy.async` on the issuing thread: the channel's earlier
    TMA stores (`Write(tma=True)`) complete and are ordered before its later generic-proxy accesses, so
    the signal's own clause orders them (NCCL 3f29db27's fix; clause NV-proxy-fenced)."""


@dataclass(frozen=True, slots=True)
class SrcStore:
    """The GPU's stores of this epoch's payload into the send buffer, for the source bytes
    [offset, offset+length) (source offsets as a `Write`'s: offset + shift, the bytes a receiver
    expects there). Until a `SrcFlush` of the same channel they may sit in the GPU's cache, unseen
    by the NIC's DMA read (`epfuzz.model.source`, ROCm aorta #205). A sender without source ops has
    its send buffer written back before the epoch."""

    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class SrcFlush:
    """A GPU-side flush (L2 / HDP writeback, NCCL's GDR flush) of this channel's earlier `SrcStore`s:
    every later DMA read of the NIC sees them. `relaxed=True` is the flush issued with PCIe relaxed
    ordering, which may pass the writeback it is meant to follow: it orders nothing (aorta #205)."""

    relaxed: bool = False


@dataclass(frozen=True, slots=True)
class SrcClear:
    """The GPU rewrites (zeroes) the send buffer's source bytes [offset, offset+length), e.g. to
    clear it for the next round: a DMA read of the NIC at or after this point may send the zeros."""

    offset: int
    length: int


Op = (Write | WriteValue | AtomicAdd | WriteImm | Send | Read | CeCopy | CeValue | Spin | Flush | SrcStore | SrcFlush
      | SrcClear | ProxyFence)
WR_OPS = (Write, WriteValue, AtomicAdd, WriteImm, Send, Read, CeCopy, CeValue)
#: the GPU's own accesses to the send buffer (`epfuzz.model.source`): no WR, no receiver memory
SOURCE_OPS = (SrcStore, SrcFlush, SrcClear)
#: the GPU-only ops: no WR (the requester only paces the channel through them)
GPU_OPS = (SrcStore, SrcFlush, SrcClear, ProxyFence)

# every op's __init__ without a generic attribute set per field (same signature, `epfuzz.ir.slotinit`): a
# protocol's sender makes its ops anew for each fresh configuration (issue 31). Checked: each int and bool
# field holds a value of its type (an integer for an int, 0 and 1 for False and True; else a TypeError naming
# the field), as the compiled core reads them, so that both paths run the same ops and refuse the same
for _cls in (Write, WriteValue, AtomicAdd, WriteImm, Send, Read, CeCopy, CeValue, Spin, Flush, ProxyFence, SrcStore,
             SrcFlush, SrcClear):
    fast_init(_cls, checked=True)
