"""GPU posting, requester NIC, port and network: from sender ops to packets with arrival times.

Time is in integer nanoseconds and everything here is a pure function of the
scenario, so the same scenario always yields the same packets.

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
  except that with adaptive routing the schedule may move packets earlier
  (`epfuzz.sim.adversary` with `epfuzz.sim.pass_rules.packet_pass_rule`).
"""

from __future__ import annotations

import heapq
from operator import attrgetter

from epfuzz import ops
from epfuzz.scenario import Scenario
from epfuzz.sim.packets import Packet, PacketKind, Wr

POST_NS = 20          # one ibv_post_send from a GPU thread (doorbell batched)
LINK_BYTES_PER_NS = 25  # 200 Gb/s
BASE_LATENCY_NS = 600   # one way, wire + switch
MIN_PKT_BYTES = 64      # headers: even a zero-length packet takes wire time

# members bound once: on Python 3.11 every `PacketKind.X` goes through EnumType.__getattr__'s slow
# attribute hook (~0.15 us), which the requester would otherwise pay per WR
_WRITE, _VALUE, _ATOMIC, _IMM, _SEND = (PacketKind.WRITE, PacketKind.VALUE, PacketKind.ATOMIC, PacketKind.IMM,
                                        PacketKind.SEND)

# sort keys as C-level attribute getters (the same tuples the lambdas built, without a Python call per packet)
_BY_READY = attrgetter("ready", "qp", "psn")
_BY_ARRIVAL = attrgetter("arrive", "depart", "qp", "psn")

#: the ops that become a WR (`Spin` and `Flush` only pace the posting channel)
Posted = ops.Write | ops.WriteValue | ops.AtomicAdd | ops.WriteImm | ops.Send

#: one packet of a WR before timing: kind, region, offset, length, value, last of its WR
Piece = tuple[PacketKind, str, int, int, int, bool]


def pieces(op: ops.Op, mtu: int) -> list[Piece]:
    """The packets a WR becomes: payload split at MTU boundaries, everything else one packet."""
    out: list[Piece] = []
    if isinstance(op, ops.Write):
        n = max(1, -(-op.length // mtu))
        for i in range(n):
            off = op.offset + i * mtu
            out.append((_WRITE, op.region, off, min(mtu, op.offset + op.length - off), op.shift,
                        i == n - 1))
    elif isinstance(op, ops.WriteImm):
        n = max(1, -(-op.length // mtu))
        for i in range(n):
            off = op.offset + i * mtu
            ln = max(0, min(mtu, op.offset + op.length - off))
            out.append((_IMM, op.region, off, ln, op.imm, i == n - 1))
    elif isinstance(op, ops.WriteValue):
        out.append((_VALUE, op.region, op.offset, 8, op.value, True))
    elif isinstance(op, ops.AtomicAdd):
        out.append((_ATOMIC, op.region, op.offset, 8, op.delta, True))
    elif isinstance(op, ops.Send):
        out.append((_SEND, ops.RECV, op.slot * 16, 8, op.value, True))
    else:  # pragma: no cover
        raise TypeError(op)
    return out


class SendQueues:
    """The requester NIC's per-QP send queues: when each WR starts, its packets, when it is ACKed."""

    def __init__(self, scn: Scenario, epoch: int, wr_base: int, psn: list[int]) -> None:
        f = scn.faults
        nq = scn.topology.num_qps
        self.epoch, self.wr_base, self.psn = epoch, wr_base, psn
        self.mtu = scn.chunking.mtu
        self.qdiv = [f.qp_rate_div[q] if q < len(f.qp_rate_div) else 1 for q in range(nq)]
        self.free = [0] * nq         # when the QP's send queue is next idle
        self.atomic_done = [0] * nq  # completion of the QP's latest ATOMIC (what a fence waits for)
        self.acked = [0] * nq        # completion of all the QP's WRs so far (what a Flush waits for)
        self.lat = [BASE_LATENCY_NS + f.port_delay_ns + (f.qp_delay_ns[q] if q < len(f.qp_delay_ns) else 0)
                    for q in range(nq)]
        self.wrs: list[Wr] = []
        self.pkts: list[Packet] = []

    def post(self, op: Posted, channel: int, index: int, qp: int, now: int) -> None:
        """Post `op` (the channel's op number `index`) on `qp` at time `now`."""
        w = Wr()
        w.id = wid = self.wr_base + len(self.wrs)
        w.epoch, w.channel, w.op_index, w.op, w.qp, w.post = self.epoch, channel, index, op, qp, now
        start = self.free[qp]
        if now > start:
            start = now
        if op.fence and self.atomic_done[qp] > start:
            start = self.atomic_done[qp]
        w.start = start
        if isinstance(op, ops.Write):
            ready = self._payload(op.region, op.offset, op.length, _WRITE, op.shift, 0, channel, index, qp, wid,
                                  start)
        elif isinstance(op, ops.WriteImm):
            ready = self._payload(op.region, op.offset, op.length, _IMM, op.imm, op.cq_slot, channel, index, qp,
                                  wid, start)
        else:  # one packet: the pieces() cases of an 8-byte value, atomic or send
            ready = start + MIN_PKT_BYTES * self.qdiv[qp] // LINK_BYTES_PER_NS
            if isinstance(op, ops.WriteValue):
                self._packet(channel, index, qp, wid, _VALUE, op.region, op.offset, 8, op.value, True, ready, 0)
            elif isinstance(op, ops.AtomicAdd):
                self._packet(channel, index, qp, wid, _ATOMIC, op.region, op.offset, 8, op.delta, True, ready, 0)
            else:
                self._packet(channel, index, qp, wid, _SEND, ops.RECV, op.slot * 16, 8, op.value, True, ready,
                             op.slot)
        self.free[qp] = ready
        w.done = done = ready + 2 * self.lat[qp]
        if done > self.acked[qp]:
            self.acked[qp] = done
        if isinstance(op, ops.AtomicAdd) and done > self.atomic_done[qp]:
            self.atomic_done[qp] = done
        self.wrs.append(w)

    def _payload(self, region: str, o0: int, length: int, kind: PacketKind, value: int, cq_slot: int,
                 channel: int, index: int, qp: int, wid: int, ready: int) -> int:
        """The MTU pieces of a WRITE (value: shift) or WRITE_WITH_IMM (value: imm), paced; the last ready time."""
        mtu, div = self.mtu, self.qdiv[qp]
        end = o0 + length
        n = max(1, -(-length // mtu))
        epoch, psn, append = self.epoch, self.psn, self.pkts.append
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
            p.epoch, p.channel, p.wr, p.qp, p.psn, p.kind = epoch, channel, wid, qp, psn[qp], kind
            psn[qp] += 1
            p.region, p.off, p.length, p.value, p.last, p.ready = region, off, ln, value, i == n - 1, ready
            p.cq_slot = cq_slot
            p.op_index = index
            append(p)
        return ready

    def _packet(self, channel: int, index: int, qp: int, wid: int, kind: PacketKind, region: str, off: int,
                ln: int, value: int, last: bool, ready: int, cq_slot: int) -> None:
        p = Packet()
        p.seq = -1
        p.epoch, p.channel, p.wr, p.qp, p.psn, p.kind = self.epoch, channel, wid, qp, self.psn[qp], kind
        self.psn[qp] += 1
        p.region, p.off, p.length, p.value, p.last, p.ready = region, off, ln, value, last, ready
        p.cq_slot = cq_slot
        p.op_index = index
        self.pkts.append(p)


def post_and_send(scn: Scenario, programs: list[list[ops.Op]], epoch: int, wr_base: int,
                  psn: list[int]) -> tuple[list[Wr], list[Packet]]:
    """GPU posting and requester NIC: WRs with times, packets in arrival order with times.

    The next op is the earliest channel's (ties: the lowest channel), kept in a heap.
    """
    nq = scn.topology.num_qps
    sq = SendQueues(scn, epoch, wr_base, psn)
    heap = [(0, c, 0) for c, prog in enumerate(programs) if prog]  # (time, channel, next op index)
    heapq.heapify(heap)
    acked, post = sq.acked, sq.post
    while heap:
        t, c, idx = heap[0]
        prog = programs[c]
        op = prog[idx]
        if isinstance(op, ops.Spin):
            t += op.ns
        elif isinstance(op, ops.Flush):
            a = acked[op.qp % nq]
            if a > t:
                t = a
        else:
            post(op, c, idx, op.qp % nq, t)
            t += POST_NS
        if idx + 1 < len(prog):
            heapq.heapreplace(heap, (t, c, idx + 1))
        else:
            heapq.heappop(heap)
    return sq.wrs, port_and_wire(sq.pkts, scn.faults.port_rate_div, sq.lat)


def port_and_wire(pkts: list[Packet], port_rate_div: int, lat: list[int]) -> list[Packet]:
    """One port FIFO by ready time, then the wire: departure and arrival times, in arrival order."""
    pkts.sort(key=_BY_READY)
    port_free = 0
    for p in pkts:
        p.depart = max(p.ready, port_free)
        port_free = p.depart + max(p.length, MIN_PKT_BYTES) * port_rate_div // LINK_BYTES_PER_NS
        p.arrive = p.depart + lat[p.qp]
    pkts.sort(key=_BY_ARRIVAL)
    return pkts
