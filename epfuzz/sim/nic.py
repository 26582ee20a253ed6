"""Requester, network and responder: from sender ops to the TLP stream at the root complex.

Time is in integer nanoseconds and everything here is a pure function of the
scenario, so the same scenario always yields the same packets and TLPs.

- GPU side: each channel posts its ops in program order; posting costs POST_NS,
  Spin adds its length, Flush waits for local completion (ACK) of the QP's WRs.
  Channels run concurrently; the global post order is by time, then channel.
- Requester NIC: one send queue per QP, processed in order. A WRITE becomes
  ceil(len/MTU) packets paced at the (throttled) QP rate; IBV_SEND_FENCE delays a
  WR until the QP's earlier ATOMICs have completed (IB: fence orders after prior
  READ/ATOMIC only, never after WRITEs). QPs are not ordered with each other.
- Port: packets of all QPs leave through one port in ready-time order, at the
  (throttled) port rate.
- Network: fixed latency plus per-QP and per-port added delay; in order per QP,
  except that with adaptive routing the schedule may move packets earlier.
- Responder NIC: processes packets in arrival order. Payload becomes posted
  MemWr TLPs split at max-payload-size boundaries, carrying RO when the MR and
  the NIC allow it. A FETCH_AND_ADD becomes one AtomicOp (non-posted with data,
  PCI_ATOMIC_MODE=4) or a MemRd followed, after its completion, by a MemWr
  (mode 0). Atomics and CQEs (WRITE_WITH_IMM, SEND; strict MemWr TLPs) are
  executed only once every earlier packet of the QP has arrived: the responder
  executes requests in PSN order, and only RDMA WRITE payload may be placed out
  of order under adaptive routing. With o9-20 enforced, an atomic additionally
  must not pass the QP's earlier TLPs at PCIe.
"""

from __future__ import annotations

from epfuzz import ops
from epfuzz.ordering import Attrs, TlpType
from epfuzz.scenario import Scenario

POST_NS = 20          # one ibv_post_send from a GPU thread (doorbell batched)
LINK_BYTES_PER_NS = 25  # 200 Gb/s
BASE_LATENCY_NS = 600   # one way, wire + switch
MIN_PKT_BYTES = 64      # headers: even a zero-length packet takes wire time

# packet kinds
PK_WRITE, PK_VALUE, PK_ATOMIC, PK_IMM, PK_SEND = range(5)
# TLP actions on memory
T_COPY, T_VALUE, T_ADD, T_READ, T_CQE = range(5)


class Packet:
    n = 1  # one unit for the adversary: packets are never split

    __slots__ = ("seq", "epoch", "channel", "wr", "qp", "psn", "kind", "region", "off", "length",
                 "value", "last", "cq_slot", "ready", "depart", "arrive", "op_index")

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Packet(seq={self.seq}, qp={self.qp}, psn={self.psn}, kind={self.kind}, off={self.off})"


class Tlp:
    """A run of `n` same-attribute TLPs over one contiguous byte range.

    Payload of one WR is split into max-payload-size TLPs; keeping them as one run
    (split lazily when the adversary moves something into the middle) makes cost
    scale with packets, not bytes. `seq` is the arrival index of the run's first
    TLP; its TLPs have seq .. seq+n-1.
    """

    __slots__ = ("seq", "n", "mps", "epoch", "attrs", "action", "qp", "region", "off", "length", "value",
                 "dep", "hold", "pkt", "wr", "target", "local")

    def __repr__(self) -> str:  # pragma: no cover
        a = self.attrs
        return f"Tlp(seq={self.seq}, n={self.n}, {a.type.name}, ro={a.ro}, {self.region}+{self.off})"

    def split(self, k: int) -> tuple[Tlp, Tlp]:
        """Split after the first k TLPs of the run (0 < k < n)."""
        cut = (self.off // self.mps + k) * self.mps
        head, tail = Tlp(), Tlp()
        for name in Tlp.__slots__:
            v = getattr(self, name)
            setattr(head, name, v)
            setattr(tail, name, v)
        head.n, head.length = k, cut - self.off
        tail.seq, tail.n, tail.off, tail.length = self.seq + k, self.n - k, cut, self.off + self.length - cut
        return head, tail


class Wr:
    __slots__ = ("id", "epoch", "channel", "op_index", "op", "qp", "post", "start", "done")


def post_and_send(scn: Scenario, programs: list[list[ops.Op]], epoch: int, wr_base: int,
                  psn: list[int]) -> tuple[list[Wr], list[Packet]]:
    """GPU posting and requester NIC: WRs with times, packets with ready times."""
    f = scn.faults
    mtu = scn.chunking.mtu
    nq = scn.topology.num_qps
    qdiv = [f.qp_rate_div[q] if q < len(f.qp_rate_div) else 1 for q in range(nq)]
    qp_free = [0] * nq
    qp_atomic_done = [0] * nq
    qp_acked = [0] * nq
    lat = [BASE_LATENCY_NS + f.port_delay_ns + (f.qp_delay_ns[q] if q < len(f.qp_delay_ns) else 0)
           for q in range(nq)]
    t = [0] * len(programs)
    pc = [0] * len(programs)
    wrs: list[Wr] = []
    pkts: list[Packet] = []
    while True:
        best = -1
        for c in range(len(programs)):
            if pc[c] < len(programs[c]) and (best < 0 or t[c] < t[best]):
                best = c
        if best < 0:
            break
        c = best
        op = programs[c][pc[c]]
        idx = pc[c]
        pc[c] += 1
        if isinstance(op, ops.Spin):
            t[c] += op.ns
            continue
        if isinstance(op, ops.Flush):
            t[c] = max(t[c], qp_acked[op.qp % nq])
            continue
        q = op.qp % nq
        w = Wr()
        w.id = wr_base + len(wrs)
        w.epoch, w.channel, w.op_index, w.op, w.qp, w.post = epoch, c, idx, op, q, t[c]
        t[c] += POST_NS
        start = max(w.post, qp_free[q])
        if op.fence:
            start = max(start, qp_atomic_done[q])
        w.start = start
        pieces: list[tuple[int, str, int, int, int, bool]] = []  # kind, region, off, len, value, last
        if isinstance(op, ops.Write):
            n = max(1, -(-op.length // mtu))
            for i in range(n):
                off = op.offset + i * mtu
                pieces.append((PK_WRITE, op.region, off, min(mtu, op.offset + op.length - off), op.shift,
                               i == n - 1))
        elif isinstance(op, ops.WriteImm):
            n = max(1, -(-op.length // mtu))
            for i in range(n):
                off = op.offset + i * mtu
                ln = max(0, min(mtu, op.offset + op.length - off))
                pieces.append((PK_IMM, op.region, off, ln, op.imm, i == n - 1))
        elif isinstance(op, ops.WriteValue):
            pieces.append((PK_VALUE, op.region, op.offset, 8, op.value, True))
        elif isinstance(op, ops.AtomicAdd):
            pieces.append((PK_ATOMIC, op.region, op.offset, 8, op.delta, True))
        elif isinstance(op, ops.Send):
            pieces.append((PK_SEND, ops.RECV, op.slot * 16, 8, op.value, True))
        else:  # pragma: no cover
            raise TypeError(op)
        ready = start
        for kind, region, off, ln, value, last in pieces:
            p = Packet()
            ready += max(ln, MIN_PKT_BYTES) * qdiv[q] // LINK_BYTES_PER_NS
            p.seq = -1
            p.epoch, p.channel, p.wr, p.qp, p.psn, p.kind = epoch, c, w.id, q, psn[q], kind
            psn[q] += 1
            p.region, p.off, p.length, p.value, p.last, p.ready = region, off, ln, value, last, ready
            p.cq_slot = getattr(op, "cq_slot", getattr(op, "slot", 0))
            p.op_index = idx
            pkts.append(p)
        qp_free[q] = ready
        w.done = ready + 2 * lat[q]
        qp_acked[q] = max(qp_acked[q], w.done)
        if isinstance(op, ops.AtomicAdd):
            qp_atomic_done[q] = max(qp_atomic_done[q], w.done)
        wrs.append(w)
    # port: one FIFO by ready time, then the wire
    pkts.sort(key=lambda p: (p.ready, p.qp, p.psn))
    port_free = 0
    for p in pkts:
        p.depart = max(p.ready, port_free)
        port_free = p.depart + max(p.length, MIN_PKT_BYTES) * f.port_rate_div // LINK_BYTES_PER_NS
        p.arrive = p.depart + lat[p.qp]
    pkts.sort(key=lambda p: (p.arrive, p.depart, p.qp, p.psn))
    return wrs, pkts


#: receiver-local stores (`Tlp.local`): none, ordered before the epoch (barrier), or unordered with it
LOCAL_NONE, LOCAL_BARRIER, LOCAL_UNORDERED = 0, 1, 2


def respond(scn: Scenario, arrivals: list[Packet], layout_max_signals: int, tlp_base: int,
            targets: dict[str, int] | None = None,
            prologue: dict[int, list[tuple[str, int, int, bool]]] | None = None) -> list[Tlp]:
    """Responder NIC: packets in arrival order to TLPs in root-complex arrival order.

    `targets` maps regions to PCIe completers (0 = the default path); `prologue`
    gives, per epoch, the receiver's own stores (region, offset, value, ordered)
    that precede the epoch's traffic: behind a barrier, or racing it.
    """
    targets = targets or {}
    prologue = prologue or {}
    k = scn.knobs
    mps = scn.chunking.max_payload
    ro = k.mr_relaxed and k.nic_relaxed_ordering
    nf = k.num_functions
    attrs: dict[tuple[TlpType, bool, int], Attrs] = {}

    def at(tp: TlpType, r: bool, qp: int) -> Attrs:
        key = (tp, r, qp % nf)
        a = attrs.get(key)
        if a is None:
            a = attrs[key] = Attrs(tp, ro=r, ido=k.ido, rid=qp % nf)
        return a

    out: list[Tlp] = []
    units = [tlp_base]
    # per-QP in-order completion tracking: lowest PSN not yet arrived
    arrived: dict[int, set[int]] = {}
    low: dict[int, int] = {}
    held: dict[int, list[Packet]] = {}
    first_psn: dict[int, int] = {}
    for p in arrivals:
        first_psn[p.qp] = min(first_psn.get(p.qp, p.psn), p.psn)

    def emit(tp: TlpType, r: bool, action: int, p: Packet, region: str, off: int, length: int,
             value: int, dep: int = -1, hold: bool = False, n: int = 1) -> Tlp:
        t = Tlp()
        t.seq, t.n, t.mps = units[0], n, mps
        units[0] += n
        t.epoch, t.attrs, t.action, t.qp = p.epoch, at(tp, r, p.qp), action, p.qp
        t.region, t.off, t.length, t.value = region, off, length, value
        t.dep, t.hold, t.pkt, t.wr = dep, hold, p.seq, p.wr
        t.target, t.local = targets.get(region, 0), LOCAL_NONE
        out.append(t)
        return t

    local_attrs = Attrs(TlpType.POSTED)

    def local_stores(epoch: int) -> None:
        for region, off, value, ordered in prologue.get(epoch, ()):
            t = Tlp()
            t.seq, t.n, t.mps = units[0], 1, mps
            units[0] += 1
            t.epoch, t.attrs, t.action, t.qp = epoch, local_attrs, T_VALUE, -1
            t.region, t.off, t.length, t.value = region, off, 8, value
            t.dep, t.hold, t.pkt, t.wr = -1, False, -1, -1
            t.target, t.local = targets.get(region, 0), LOCAL_BARRIER if ordered else LOCAL_UNORDERED
            out.append(t)

    def payload(p: Packet, action: int, value: int | None = None) -> None:
        """MemWr TLPs split at max-payload-size address boundaries, as one run."""
        if not p.length:
            return
        n = (p.off + p.length - 1) // mps - p.off // mps + 1
        last = out[-1] if out else None
        if (action == T_COPY and last is not None and last.action == T_COPY and last.wr == p.wr
                and last.value == (p.value if value is None else value)
                and last.local == LOCAL_NONE
                and last.off + last.length == p.off and p.off % mps == 0):
            last.n += n        # the next packet of the same WR, right behind: extend the run
            last.length += p.length
            units[0] += n
            return
        emit(TlpType.POSTED, ro, action, p, p.region, p.off, p.length, p.value if value is None else value, n=n)

    def complete(p: Packet) -> None:
        """The in-order completion point of packet p (CQE, or an o9-20 atomic)."""
        if p.kind == PK_ATOMIC:
            atomic(p, hold=k.hca_o920)
        else:
            emit(TlpType.POSTED, False, T_CQE, p, ops.CQ,
                 (p.channel * layout_max_signals + p.cq_slot) * 16, 16, p.value)

    def atomic(p: Packet, hold: bool) -> None:
        if k.atomic_mode == 4:
            emit(TlpType.NP_DATA, ro, T_ADD, p, p.region, p.off, 8, p.value, hold=hold)
        else:
            rd = emit(TlpType.READ, False, T_READ, p, p.region, p.off, 8, 0, hold=hold)
            emit(TlpType.POSTED, ro, T_ADD, p, p.region, p.off, 8, p.value, dep=rd.seq, hold=hold)

    epoch = -1
    for p in arrivals:
        if p.epoch != epoch:
            epoch = p.epoch
            local_stores(epoch)
        q = p.qp
        if p.kind == PK_WRITE or p.kind == PK_VALUE:
            payload(p, T_COPY if p.kind == PK_WRITE else T_VALUE)
        elif p.kind == PK_ATOMIC:  # executed in PSN order, even when writes are placed out of order
            held.setdefault(q, []).append(p)
        elif p.kind == PK_IMM:
            if p.length:
                payload(p, T_COPY, 0)  # the packet's value is the immediate, not a shift
            if p.last:
                held.setdefault(q, []).append(p)
        elif p.kind == PK_SEND:  # the message lands in the posting channel's entry `slot`, where its CQE goes
            emit(TlpType.POSTED, ro, T_VALUE, p, ops.RECV, (p.channel * layout_max_signals + p.cq_slot) * 16, 8,
                 p.value)
            held.setdefault(q, []).append(p)
        s = arrived.setdefault(q, set())
        s.add(p.psn)
        lo = low.get(q, first_psn[q])
        while lo in s:
            lo += 1
        low[q] = lo
        if q in held:
            keep = []
            for h in held[q]:
                if h.psn < lo:
                    complete(h)
                else:
                    keep.append(h)
            held[q] = keep
    return out
