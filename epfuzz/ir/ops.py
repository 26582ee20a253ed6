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

DATA, SIGNAL, CQ, RECV = "data", "signal", "cq", "recv"
REGIONS = (DATA, SIGNAL, CQ, RECV)


@dataclass(frozen=True, slots=True)
class Write:
    """RDMA WRITE of this epoch's payload bytes for [offset, offset+length) of `region`.

    `shift` moves the source: the bytes sent are those the receiver expects at
    offset+shift (a sender that computes a wrong slot, bug pattern 10).
    """

    qp: int
    region: str
    offset: int
    length: int
    fence: bool = False
    shift: int = 0


@dataclass(frozen=True, slots=True)
class WriteValue:
    """RDMA WRITE of a 64-bit value (a flag or a tail) into `region` at `offset`."""

    qp: int
    region: str
    offset: int
    value: int
    fence: bool = False


@dataclass(frozen=True, slots=True)
class AtomicAdd:
    """RDMA ATOMIC FETCH_AND_ADD on a 64-bit word: DeepEP's "VA signal"."""

    qp: int
    region: str
    offset: int
    delta: int
    fence: bool = False


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
    """

    qp: int


Op = Write | WriteValue | AtomicAdd | WriteImm | Send | Read | CeCopy | CeValue | Spin | Flush
WR_OPS = (Write, WriteValue, AtomicAdd, WriteImm, Send, Read, CeCopy, CeValue)
