"""The units the emulator moves: work requests, network packets and PCIe TLP runs.

The requester (`epfuzz.sim.requester`) makes `Wr`s and `Packet`s, the responder
(`epfuzz.sim.responder`) turns packets into `Tlp`s, the adversary
(`epfuzz.sim.adversary`) reorders both, and memory (`epfuzz.sim.memory`) applies
TLPs by their `TlpAction`. The enums are `IntEnum`s so that the kinds stay as
cheap to compare and hash as the plain integers they replaced.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, ClassVar, Final

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import ops
from epfuzz.ir.opmake import K_ATOMIC as K_ATOMIC
from epfuzz.ir.opmake import K_CECOPY as K_CECOPY
from epfuzz.ir.opmake import K_CEVALUE as K_CEVALUE
from epfuzz.ir.opmake import K_FLUSH as K_FLUSH
from epfuzz.ir.opmake import K_GPU as K_GPU
from epfuzz.ir.opmake import K_IMM as K_IMM
from epfuzz.ir.opmake import K_OTHER as K_OTHER
from epfuzz.ir.opmake import K_READ as K_READ
from epfuzz.ir.opmake import K_SEND as K_SEND
from epfuzz.ir.opmake import K_SPIN as K_SPIN
from epfuzz.ir.opmake import K_VALUE as K_VALUE
from epfuzz.ir.opmake import K_WRITE as K_WRITE
from epfuzz.ir.opmake import OpRec

if TYPE_CHECKING:
    from epfuzz.model.ordering import Attrs


class PacketKind(IntEnum):
    """What an IB packet asks of the responder."""

    WRITE = 0    # RDMA WRITE payload (one MTU piece of a data WR)
    VALUE = 1    # RDMA WRITE of an 8-byte flag
    ATOMIC = 2   # FETCH_AND_ADD
    IMM = 3      # RDMA WRITE_WITH_IMM (a piece; the last one makes the CQE)
    SEND = 4     # SEND into a posted receive (message plus CQE)
    READ = 5     # RDMA READ request (the responder reads its memory; the response flows back)


#: the members bound once, for the requester and the responder, which read them per packet: on Python 3.11 every
#: `PacketKind.X` goes through EnumType.__getattr__'s slow hook (~0.15 us), and a plain module global is a
#: dict lookup per use where a Final one is a C static of the compiled core
P_WRITE: Final = PacketKind.WRITE
P_VALUE: Final = PacketKind.VALUE
P_ATOMIC: Final = PacketKind.ATOMIC
P_IMM: Final = PacketKind.IMM
P_SEND: Final = PacketKind.SEND
P_READ: Final = PacketKind.READ


class TlpAction(IntEnum):
    """What a TLP does to receiver memory when it becomes visible."""

    COPY = 0     # write sender bytes (value: source shift)
    VALUE = 1    # write the 8-byte value
    ADD = 2      # atomic add (one AtomicOp, or the write-back of a read-modify-write)
    READ = 3     # the MemRd of a read-modify-write: changes nothing
    CQE = 4      # write a 16-byte completion entry
    FETCH = 5    # the MemRd of an RDMA READ: changes nothing (`epfuzz.model.rdma_read`)
    STALE = 6    # write zeros: what the NIC's DMA read of an unflushed or rewritten send buffer carried


#: the members bound once, for the responder that makes TLPs and the memory, receiver and pass rule that read them
#: per TLP (the same reasons as `P_*`)
A_COPY: Final = TlpAction.COPY
A_VALUE: Final = TlpAction.VALUE
A_ADD: Final = TlpAction.ADD
A_READ: Final = TlpAction.READ
A_CQE: Final = TlpAction.CQE
A_FETCH: Final = TlpAction.FETCH
A_STALE: Final = TlpAction.STALE


class LocalStore(IntEnum):
    """Whether a TLP is the receiver's own store at an epoch start, and how it is ordered.

    NONE is 0 so that `if t.local` asks "is this a receiver-local store?".
    """

    NONE = 0         # traffic from the network
    BARRIER = 1      # ordered before the epoch's traffic
    UNORDERED = 2    # racing the epoch's traffic


# What the requester (`epfuzz.sim.requester`) does with an op, as a small int: `op_kind` looks it up by
# the op's exact type (one dict hit) where an isinstance chain cost a failed `__instancecheck__` per class
# tried, per op (issue 31). A WRITE and a copy-engine copy are timed as MTU pieces (the copy as a WRITE on
# its lane, `cebatch`). The WR kinds come first (<= K_SEND); K_OTHER, an op of no known class, posts and
# starts as a SEND did. Final: mypyc compiles them in as constants, no module-dict lookup per use. They are
# defined beside `epfuzz.ir.opmake.OpRec`, which carries one, and imported above.
#: the chain `op_kind` classifies a new type by, first match wins: the order the requester's branches had
_CHAIN: tuple[tuple[type, int], ...] = (
    (ops.Spin, K_SPIN), (ops.Flush, K_FLUSH), (ops.SrcStore, K_GPU), (ops.SrcFlush, K_GPU), (ops.SrcClear, K_GPU),
    (ops.ProxyFence, K_GPU), (ops.Write, K_WRITE), (ops.CeCopy, K_CECOPY), (ops.WriteImm, K_IMM),
    (ops.WriteValue, K_VALUE), (ops.CeValue, K_CEVALUE), (ops.AtomicAdd, K_ATOMIC), (ops.Read, K_READ),
    (ops.Send, K_SEND))
#: Final: a C static, where a module global was a dict lookup per op classified
_KINDS: Final[dict[type, int]] = {}


def op_kind(op: object) -> int:
    """The requester's kind of `op`: by its exact type, classified on first sight (a subclass is what its
    first base in `_CHAIN` is, as `isinstance` had it; any other op is K_OTHER)."""
    tp = type(op)
    k = _KINDS.get(tp)
    if k is None:
        k = next((kind for cls, kind in _CHAIN if isinstance(op, cls)), K_OTHER)
        _KINDS[tp] = k
    return k


#: `Packet.acked` of a packet whose channel had waited for no completion: shared, never written to
NO_ACKS: Final[list[int]] = []


def with_acked(acked: list[int], num_qps: int, qp: int, wr: int) -> list[int]:
    """`acked` (a `Packet.acked`) with QP `qp` known to have arrived up to WR `wr`: a new list where that raises
    its bound, `acked` itself where it does not (packets and WRs share these lists: none is written to)."""
    if acked and wr <= acked[qp]:
        return acked
    out = list(acked) if acked else [-1] * num_qps
    out[qp] = wr
    return out


# `acyclic`: compiled, these classes are not tracked by the cycle collector (no GC header, link, untrack or
# trashcan per object, and their allocations do not count toward young collections): a packet, TLP, WR or Flush
# wait refers only to ints, strings, enum members, Attrs, lists of ints and (a WR) its frozen op, never back to
# anything that refers to it. A fresh scenario makes and frees ~24 packets, ~24 TLPs and ~10 WRs (issue 31).
@mypyc_attr(acyclic=True)
class Packet:
    # annotated (not only slotted) so that mypy and mypyc (`epfuzz.core.corebuild`) know each field's type
    __slots__ = ("seq", "epoch", "channel", "wr", "qp", "psn", "kind", "region", "off", "length",
                 "value", "last", "cq_slot", "ready", "depart", "arrive", "op_index", "after", "fence_read", "batch",
                 "acked", "stale", "strong")
    n: ClassVar[int] = 1  # one unit for the adversary: packets are never split
    seq: int
    epoch: int
    channel: int
    wr: int
    qp: int
    psn: int
    kind: PacketKind
    region: str
    off: int
    length: int
    value: int
    last: bool
    cq_slot: int
    ready: int
    depart: int
    arrive: int
    op_index: int
    after: int  # the READ WR its channel's Flush waited for before it was posted (IB-read-response), or -1
    fence_read: int  # the READ WR of its QP a fenced WR waited for (IB-fence-read), or -1
    batch: int  # the copy-engine batch of a CeCopy/CeValue (`epfuzz.model.cebatch`), or -1
    #: per QP, the last WR of that QP whose completion its channel's Flushes had waited for before it was posted
    #: (-1: none; `NO_ACKS`: no Flush waited for anything): those WRs' packets had all arrived (IB-ack)
    acked: list[int]
    #: the `epfuzz.model.source` clause when the NIC's read of the send buffer may have carried other bytes
    #: than the payload ("" when it carried the payload)
    stale: str
    strong: bool  # the WQE's strong-ordering fence flag (`epfuzz.model.device`): placed without RO

    def __init__(self) -> None:
        self.after = -1
        self.fence_read = -1
        self.batch = -1
        self.acked = NO_ACKS
        self.stale = ""
        self.strong = False

    def split(self, k: int) -> tuple[Packet, Packet]:  # pragma: no cover - the adversary splits runs of n > 1
        raise AssertionError("a packet is one unit: it is never split")

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Packet(seq={self.seq}, qp={self.qp}, psn={self.psn}, kind={self.kind}, off={self.off})"


@mypyc_attr(acyclic=True)
class Tlp:
    """A run of `n` same-attribute TLPs over one contiguous byte range.

    Payload of one WR is split into max-payload-size TLPs; keeping them as one run
    (split lazily when the adversary moves something into the middle) makes cost
    scale with packets, not bytes. `seq` is the arrival index of the run's first
    TLP; its TLPs have seq .. seq+n-1.
    """

    __slots__ = ("seq", "n", "mps", "epoch", "attrs", "action", "qp", "region", "off", "length", "value",
                 "dep", "hold", "pkt", "wr", "target", "local", "after", "fence_read", "batch", "acked")
    seq: int
    n: int
    mps: int
    epoch: int
    attrs: Attrs
    action: TlpAction
    qp: int
    region: str
    off: int
    length: int
    value: int
    dep: int
    hold: bool
    pkt: int
    wr: int
    target: int
    local: LocalStore
    # the READ WRs whose MemRd this TLP never passes, or -1: the one its channel's Flush waited for
    # (IB-read-response) and the one of its QP its fenced WR waited for (IB-fence-read)
    after: int
    fence_read: int
    batch: int  # the copy-engine batch it was copied in (`epfuzz.model.cebatch`), or -1
    #: its packet's `Packet.acked`: per QP, the last WR whose completion its channel had waited for (a Flush's,
    #: a fence's) before posting it; it never passes the execution TLP of a READ or ATOMIC among those
    #: (IB-atomic-executed, IB-read-response)
    acked: list[int]

    def __init__(self) -> None:
        self.after = -1
        self.fence_read = -1
        self.batch = -1
        self.acked = NO_ACKS

    def __repr__(self) -> str:  # pragma: no cover
        a = self.attrs
        return f"Tlp(seq={self.seq}, n={self.n}, {a.type.name}, ro={a.ro}, {self.region}+{self.off})"

    def split(self, k: int) -> tuple[Tlp, Tlp]:
        """Split after the first k TLPs of the run (0 < k < n)."""
        cut = (self.off // self.mps + k) * self.mps
        head, tail = self.copy(), self.copy()
        head.n, head.length = k, cut - self.off
        tail.seq, tail.n, tail.off, tail.length = self.seq + k, self.n - k, cut, self.off + self.length - cut
        return head, tail

    def copy(self) -> Tlp:
        """Field by field, spelled out: a getattr/setattr loop over `__slots__` is slower and opaque to mypyc."""
        t = Tlp()
        t.seq, t.n, t.mps, t.epoch, t.attrs, t.action = self.seq, self.n, self.mps, self.epoch, self.attrs, self.action
        t.qp, t.region, t.off, t.length, t.value = self.qp, self.region, self.off, self.length, self.value
        t.dep, t.hold, t.pkt, t.wr, t.target, t.local = self.dep, self.hold, self.pkt, self.wr, self.target, self.local
        t.after, t.fence_read, t.batch, t.acked = self.after, self.fence_read, self.batch, self.acked
        return t


@mypyc_attr(acyclic=True)
class Wr:
    __slots__ = ("id", "epoch", "channel", "op_index", "rec", "qp", "post", "start", "done", "after", "fence_read",
                 "acked", "proxy_fence")
    id: int
    epoch: int
    channel: int
    op_index: int
    rec: OpRec  # the op as the requester read it (`op`: the op itself)
    qp: int
    post: int
    start: int
    done: int
    after: int  # the READ WR its channel waited for by a Flush before posting it (IB-read-response), or -1
    fence_read: int  # fenced: the READ WR of its QP it waited for (IB-fence-read), or -1
    acked: list[int]  # per QP, the last WR its channel's Flushes waited for before posting it (`Packet.acked`)
    proxy_fence: int  # the op index of the channel's first ProxyFence after this WR (ordering.NO_PROXY_FENCE: none)

    @property
    def op(self) -> ops.Op:
        """The op this WR was posted for (a built-in sender's is made on first use: `OpRec`)."""
        return self.rec.op()


@mypyc_attr(acyclic=True)
class FlushWait:
    """One `Flush` as the requester resolved it: what it waited for, by which completion clause, until when.

    `wr` is the last WR posted on the QP before the Flush (-1: none this epoch), `clause` the
    `epfuzz.model.ordering.COMPLETION_CLAUSES` entry that fixed its completion ("" when there was none to wait for).
    """

    __slots__ = ("epoch", "channel", "op_index", "qp", "at", "done", "wr", "clause")
    epoch: int
    channel: int
    op_index: int
    qp: int
    at: int
    done: int
    wr: int
    clause: str

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"FlushWait(channel={self.channel}, qp={self.qp}, at={self.at}, done={self.done}, wr={self.wr})"
