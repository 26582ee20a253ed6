"""The requester NIC's send queues: when each WR starts, its packets and their ready times, when it completes.

One send queue per QP, processed in order. A WRITE becomes ceil(len/MTU) packets paced at the (throttled)
QP rate; IBV_SEND_FENCE delays a WR until the QP's earlier ATOMICs and READs have completed, their responses
back (IB: fence orders after prior READ/ATOMIC only, never after WRITEs; `Packet.fence_read`,
`epfuzz.model.rdma_read`). QPs are unordered. Split from `epfuzz.sim.requester`, whose GPU posting drives it.
"""

from __future__ import annotations

from typing import Any, Final

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import ops
from epfuzz.ir.opmake import OpRec
from epfuzz.ir.scenario import Scenario
from epfuzz.ir.slotinit import as_flag, as_int
from epfuzz.model.ordering import NO_PROXY_FENCE
from epfuzz.protocols.opcheck import OutsideLayout, span_fits
from epfuzz.sim import packets as pk
from epfuzz.sim.packets import Packet, PacketKind, Wr
from epfuzz.sim.port import LINK_BYTES_PER_NS, MIN_PKT_BYTES, Port

BASE_LATENCY_NS: Final = 600   # one way, wire + switch
NEVER: Final = (1 << 62) - 1  # a time after every event (the largest int mypyc keeps unboxed)
_NO_PROXY_FENCE: Final = NO_PROXY_FENCE  # a C static of the compiled core (an imported name is a dict lookup)



def read_op(op: object, kind: int) -> OpRec:
    """The record of `op` (of `op_kind` `kind`, any class: a plug-in's) that the requester posts, its fields read
    in the order the requester read them from the op itself: the channel pacing's (a Spin's ns, a Flush's QP),
    a WR's QP and fence, then its kind's fields (`SendQueues.start`). A GPU op's record only holds the op."""
    o: Any = op  # its fields are those of its kind, which mypy cannot narrow by (`op_kind`)
    r = OpRec(kind)
    r._op = op
    if kind == pk.K_SPIN:
        r.value = o.ns
    elif kind == pk.K_FLUSH:
        r.qp = o.qp
        r.flag = o.stale
    elif kind == pk.K_OTHER:
        return _read_other(r, o)
    elif kind <= pk.K_OTHER:
        r.qp = o.qp
        r.fence = o.fence
        if kind >= pk.K_SEND:  # a SEND (an op of no known class starts as one)
            r.slot = o.slot
            r.value = o.value
            return r
        r.region = o.region
        r.offset = o.offset
        if kind <= pk.K_IMM:
            r.length = o.length
            if kind == pk.K_IMM:
                r.slot = o.cq_slot
                r.value = o.imm
            elif kind == pk.K_WRITE:
                r.value = o.shift
        elif kind == pk.K_READ:
            r.length = o.length
        elif kind == pk.K_ATOMIC:
            r.value = o.delta
            r.flag = o.strong
        else:
            r.value = o.value
            if kind == pk.K_VALUE:
                r.flag = o.strong
        if kind == pk.K_CECOPY or kind == pk.K_CEVALUE:
            r.batch = o.batch
    return r


def _read_other(r: OpRec, o: Any) -> OpRec:
    """`read_op` of an op of no known class, which starts as a SEND: its fields held to the rule an op class's
    constructor holds its own to (`epfuzz.ir.slotinit`; no constructor of ours made it), so that the compiled
    record's native fields take what the pure one takes (a fence of 1 is True) and both refuse the rest."""
    owner = type(o).__name__
    r.qp = as_int(o.qp, owner, "qp")
    r.fence = as_flag(o.fence, owner, "fence")
    r.slot = as_int(o.slot, owner, "slot")
    r.value = as_int(o.value, owner, "value")
    return r


@mypyc_attr(acyclic=True)  # untracked by the cycle collector: see `packets.Packet`
class Nic:
    """What the send queues read of a scenario (and of its layout, for the op check) once per build, not once per
    epoch: each field of the interpreted scenario is a generic attribute look-up from compiled code. Its lists
    are only read (every epoch's `SendQueues` shares them)."""

    def __init__(self, scn: Scenario, sizes: dict[str, int] | None = None, max_signals: int = 0,
                 num_channels: int = 0) -> None:
        #: the layout's region sizes, signals and channels where the ops' fields are checked as they are read
        #: (`OutsideLayout`; None: not checked here)
        self.sizes, self.max_signals, self.num_channels = sizes, max_signals, num_channels
        f = scn.faults
        nq = scn.topology.num_qps
        self.mtu: int = scn.chunking.mtu
        rates: tuple[int, ...] = f.qp_rate_div
        delays: tuple[int, ...] = f.qp_delay_ns
        base = BASE_LATENCY_NS + f.port_delay_ns
        self.qdiv = [rates[q] if q < len(rates) else 1 for q in range(nq)]  # per QP, its rate's divisor
        self.lat = [base + (delays[q] if q < len(delays) else 0) for q in range(nq)]  # per QP, one way
        self.port_rate_div: int = f.port_rate_div


@mypyc_attr(acyclic=True)  # untracked by the cycle collector: see `packets.Packet`
class SendQueues:
    """The requester NIC's per-QP send queues: when each WR starts, its packets, when it completes.

    A WR completes by the `epfuzz.model.ordering.COMPLETION_CLAUSES`: a WRITE, WRITE_WITH_IMM or SEND
    when the ACK of its last packet is back (IB-ack), an ATOMIC when its response is (IB-atomic-
    response): the packet's arrival, port queue included, plus the way back. Where the epoch has a
    Flush or a fenced WR the requester departs the port as the posting goes (`Port`, over `queues`), so
    that a Flush or a fence waits for that completion and not for an estimate that ignores the queue.
    """

    def __init__(self, scn: Scenario, epoch: int, wr_base: int, psn: list[int], nic: Nic | None = None) -> None:
        n = nic if nic is not None else Nic(scn)
        self.sizes, self.max_signals, self.num_channels = n.sizes, n.max_signals, n.num_channels
        self.mtu, self.qdiv, self.lat, self.port_rate_div = n.mtu, n.qdiv, n.lat, n.port_rate_div
        nq = len(n.qdiv)
        self.epoch, self.wr_base, self.psn = epoch, wr_base, psn
        self.free = [0] * nq         # when the QP's send queue is next idle
        self.wrs: list[Wr] = []
        #: per QP, its packets in PSN order (what `port.port_and_wire` merges, and `Port` departs as it goes)
        self.queues: list[list[Packet]] = [[] for _ in range(nq)]
        #: made on first use (`the_port`): most epochs have no Flush and no fence, which alone read it early
        self._port: Port | None = None
        self.atomic_pkt: list[Packet | None] = [None] * nq  # the QP's latest ATOMIC or READ (what a fence waits for)
        #: by WR (id - wr_base), a started WR's last packet, else None (what a Flush waits for)
        self.last_of: list[Packet | None] = []
        self.last_wr = [-1] * nq                            # the QP's latest WR posted, started or not
        self.last_read = [-1] * nq                          # the QP's latest READ posted (what a fence orders)
        #: every READ posted per QP (what a Flush orders); [] until the epoch's first READ (most have none)
        self.reads: list[list[int]] = []
        #: per QP, posted, not started: behind a fence (IB-fence); [] until a WR first waits (most epochs have none)
        self.waiting: list[list[Wr]] = []
        self.stalled = 0  # WRs waiting, over all QPs

    def post(self, r: OpRec, channel: int, index: int, qp: int, now: int, after: int = -1,
             acked: list[int] = pk.NO_ACKS) -> None:
        """Post the op of `r` (the channel's op number `index`, as `read_op` read it) on `qp` at time `now`
        (`after`: the READ a Flush waited for; `acked`: per QP, the last WR the channel's Flushes waited for)."""
        fence = r.fence
        kind = r.kind
        w = Wr()
        w.id = self.wr_base + len(self.wrs)
        w.epoch, w.channel, w.op_index, w.rec, w.qp, w.post = self.epoch, channel, index, r, qp, now
        # both READs hold it (review: one field kept only the fence's, and a flag fenced on its own QP could
        # pass the data its channel's Flush had waited for): the Flush's, and, fenced, the QP's latest
        w.done, w.after, w.fence_read = -1, after, self.last_read[qp] if fence else -1
        w.proxy_fence = _NO_PROXY_FENCE
        w.acked = acked
        self.wrs.append(w)
        self.last_of.append(None)
        self.last_wr[qp] = w.id
        if kind == pk.K_READ:
            self.last_read[qp] = w.id
            if not self.reads:
                self.reads = [[] for _ in range(len(self.free))]
            self.reads[qp].append(w.id)
        waiting = self.waiting
        if (waiting and waiting[qp]) or (fence and not self.fence_clear(qp)):
            # the send queue is in order: all behind a stalled fence waits
            if not waiting:
                waiting = self.waiting = [[] for _ in range(len(self.free))]
            waiting[qp].append(w)
            self.stalled += 1
            return
        self.start(w, r)

    def the_port(self) -> Port:
        """The port, made on first use: until it departs anything, a new one is what it would have been."""
        p = self._port
        if p is None:
            p = self._port = Port(self.port_rate_div, self.lat, self.queues)
        return p

    def gone(self, qp: int) -> int:
        """The PSN of the QP's last packet departed from the port (-1: none yet)."""
        p = self._port
        return -1 if p is None else p.gone[qp]

    def fence_clear(self, qp: int) -> bool:
        """Whether the QP's latest ATOMIC has left the port, so that its response time is known."""
        a = self.atomic_pkt[qp]
        return a is None or self.gone(qp) >= a.psn

    def pump(self, qp: int) -> bool:
        """Start the QP's waiting WRs up to the next fence that cannot be decided yet; whether any started."""
        queue = self.waiting[qp]
        started = False
        while queue and (not queue[0].rec.fence or self.fence_clear(qp)):
            w = queue.pop(0)
            self.stalled -= 1
            self.start(w, w.rec)
            started = True
        return started

    def flush_ready(self, wr: int) -> bool:
        """Whether WR `wr` (the last posted on its QP before a Flush) has a known completion: it has
        started and its last packet has left the port (IB-sq-order: that covers the QP's earlier WRs)."""
        last = self.last_of[wr - self.wr_base]
        return last is not None and self.gone(last.qp) >= last.psn

    def completion(self, wr: int) -> int:
        """When WR `wr` has completed: the ACK or the response of its last packet is back."""
        last = self.last_of[wr - self.wr_base]
        assert last is not None  # `flush_ready` said so
        return last.arrive + self.lat[last.qp]

    def bound(self, qp: int, wr: int = -1) -> int:
        """A time below every ready time the QP's pending decision can still produce (see `Port`):
        a fence stalled on an ATOMIC, or (`wr`) a Flush waiting for that WR."""
        last = self.last_of[wr - self.wr_base] if wr >= 0 else None
        if last is not None:
            return last.ready + 1
        a = self.atomic_pkt[qp]
        waiting = self.waiting
        return a.ready + 1 if waiting and waiting[qp] and a is not None else NEVER

    def start(self, w: Wr, r: OpRec) -> None:
        """The NIC starts WR `w` (of the op `r` records): after the QP's earlier WRs and, fenced, after its earlier
        ATOMICs completed."""
        kind = r.kind
        channel, index, qp, wid = w.channel, w.op_index, w.qp, w.id
        mine = self.queues[qp]
        first = len(mine)
        start = self.free[qp]
        if w.post > start:
            start = w.post
        a = self.atomic_pkt[qp]
        if r.fence and a is not None:
            if a.arrive + self.lat[qp] > start:  # IB-fence, IB-atomic-response
                start = a.arrive + self.lat[qp]
            w.acked = pk.with_acked(w.acked, len(self.free), qp, a.wr)  # that response needed every earlier
            # packet of the QP (o9-20)
        w.start = start
        # the op check's rules (`epfuzz.protocols.opcheck`) on the fields as they were read, before any packet
        sizes = self.sizes
        region, off = r.region, r.offset
        if kind <= pk.K_IMM:  # a WRITE, a copy-engine copy (timed as a WRITE on its lane) or a WRITE_WITH_IMM
            length = r.length
            cq = r.slot if kind == pk.K_IMM else 0
            if sizes is not None and not (span_fits(sizes, region, off, length) and (
                    kind != pk.K_IMM or (0 <= cq < self.max_signals and channel < self.num_channels))):
                raise OutsideLayout
            ready = self._payload(region, off, length, pk.P_IMM if kind == pk.K_IMM else pk.P_WRITE, r.value, cq,
                                  channel, index, qp, wid, start)
        elif kind <= pk.K_READ:  # one packet: an 8-byte value, an atomic, a READ request
            ready = start + MIN_PKT_BYTES * self.qdiv[qp] // LINK_BYTES_PER_NS
            length = r.length if kind == pk.K_READ else 8
            if sizes is not None and not (span_fits(sizes, region, off, length) and (
                    kind != pk.K_ATOMIC or off % 8 == 0)):
                raise OutsideLayout
            # the WQE's strong-ordering flag: WriteValue's and AtomicAdd's (`epfuzz.model.device`)
            if kind <= pk.K_CEVALUE:
                self._packet(channel, index, qp, wid, pk.P_VALUE, region, off, 8, r.value, True, ready, 0,
                             kind == pk.K_VALUE and r.flag)
            elif kind == pk.K_ATOMIC:
                self._packet(channel, index, qp, wid, pk.P_ATOMIC, region, off, 8, r.value, True, ready, 0, r.flag)
                self.atomic_pkt[qp] = mine[-1]
            else:  # the request; its response is the completion (IB-read-response)
                self._packet(channel, index, qp, wid, pk.P_READ, region, off, length, 0, True, ready, 0, False)
                self.atomic_pkt[qp] = mine[-1]
        else:  # a SEND (an op of no known class starts as one: `post_and_send` checked it)
            ready = start + MIN_PKT_BYTES * self.qdiv[qp] // LINK_BYTES_PER_NS
            slot = r.slot
            if sizes is not None and kind == pk.K_SEND and not (0 <= slot < self.max_signals
                                                                 and channel < self.num_channels):
                raise OutsideLayout
            self._packet(channel, index, qp, wid, pk.P_SEND, ops.RECV, slot * 16, 8, r.value, True, ready, slot,
                         False)
        self.free[qp] = ready
        self.last_of[wid - self.wr_base] = mine[-1]
        batch = r.batch  # epfuzz.model.cebatch (-1 but for a copy engine's)
        if w.after >= 0 or w.fence_read >= 0 or batch >= 0 or w.acked:  # (a conditional iterable: generic)
            for i in range(first, len(mine)):
                p = mine[i]
                p.after, p.fence_read, p.batch, p.acked = w.after, w.fence_read, batch, w.acked

    def _payload(self, region: str, o0: int, length: int, kind: PacketKind, value: int, cq_slot: int,
                 channel: int, index: int, qp: int, wid: int, ready: int) -> int:
        """The MTU pieces of a WRITE (value: shift) or WRITE_WITH_IMM (value: imm), paced; the last ready time."""
        mtu, div = self.mtu, self.qdiv[qp]
        end = o0 + length
        n = max(1, -(-length // mtu))
        # the list's own append, not a bound method kept in a local: compiled, that was a generic call per packet
        epoch, psn, pkts = self.epoch, self.psn, self.queues[qp]
        for i in range(n):  # `_packet` inlined: this loop runs once per packet
            off = o0 + i * mtu
            ln = end - off
            if ln > mtu:
                ln = mtu
            elif ln < 0:
                ln = 0
            ready += (ln if ln > MIN_PKT_BYTES else MIN_PKT_BYTES) * div // LINK_BYTES_PER_NS
            p = Packet()
            p.seq = -1
            q = psn[qp]
            p.epoch, p.channel, p.wr, p.qp, p.psn, p.kind = epoch, channel, wid, qp, q, kind
            psn[qp] = q + 1  # not `+=` on the item: compiled, that is a generic in-place add
            p.region, p.off, p.length, p.value, p.last, p.ready = region, off, ln, value, i == n - 1, ready
            p.cq_slot = cq_slot
            p.op_index = index
            pkts.append(p)
        return ready

    def _packet(self, channel: int, index: int, qp: int, wid: int, kind: PacketKind, region: str, off: int,
                ln: int, value: int, last: bool, ready: int, cq_slot: int, strong: bool) -> None:
        p = Packet()
        p.seq = -1
        p.epoch, p.channel, p.wr, p.qp, p.psn, p.kind = self.epoch, channel, wid, qp, self.psn[qp], kind
        self.psn[qp] = p.psn + 1
        p.region, p.off, p.length, p.value, p.last, p.ready = region, off, ln, value, last, ready
        p.cq_slot = cq_slot
        p.op_index = index
        p.strong = strong
        self.queues[qp].append(p)
