"""The requester's port and the wire: packets of all QPs leave one port FIFO by ready time, then cross the
wire (split from `epfuzz.sim.requester`, whose send queues decide the ready times).

Both take the send queues' packets as one list per QP (`SendQueues.queues`), each in PSN order with ready
times that never decrease (a send queue starts its WRs in order, each no earlier than the last one's last
packet was ready). So the port's (ready, QP, PSN) order is a merge of those lists by (ready, QP), and the
wire's (arrival, departure, QP, PSN) order one by (arrival, departure, QP): per QP, departures and so
arrivals never decrease either. A merge over at most eight QPs (`Topology.num_qps`) reads each packet's
head once per choice, where a sort built a key int per packet and the port a heap of tuples (issue 31).
"""

from __future__ import annotations

from typing import Final

from epfuzz.core.native import mypyc_attr
from epfuzz.sim.packets import Packet

# Final: mypyc compiles them in, where a module global is a dict lookup per packet
LINK_BYTES_PER_NS: Final = 25  # 200 Gb/s
MIN_PKT_BYTES: Final = 64      # headers: even a zero-length packet takes wire time


def depart(p: Packet, free: int, rate_div: int, lat: int) -> int:
    """`p` leaves a port idle from `free` (at its ready time or then, whichever is later) and arrives `lat`
    later; when the port is next idle: after its wire time at the port's (throttled) rate."""
    dep = p.ready if p.ready > free else free
    p.depart, p.arrive = dep, dep + lat
    return dep + (p.length if p.length > MIN_PKT_BYTES else MIN_PKT_BYTES) * rate_div // LINK_BYTES_PER_NS


@mypyc_attr(acyclic=True)  # untracked by the cycle collector: see `packets.Packet`
class Port:
    """The port FIFO, departed as far as it is decided: what a Flush or a fence needs to know early.

    Packets leave in (ready, QP, PSN) order, as `port_and_wire` sends them; a packet's departure
    is final once no packet with an earlier ready time can still be made, i.e. for ready times
    below the `horizon` the caller passes (every packet made later is ready after it).
    `port_and_wire` recomputes the same times for the whole epoch afterwards. `queues` are the send
    queues' own per-QP lists, which grow as WRs start; the port keeps how far it has departed each.
    """

    def __init__(self, rate_div: int, lat: list[int], queues: list[list[Packet]]) -> None:
        self.rate_div, self.lat, self.queues = rate_div, lat, queues
        self.pos = [0] * len(lat)    # per QP, its packets departed so far
        self.free = 0
        self.gone = [-1] * len(lat)  # per QP, the PSN of its last departed packet (a QP departs in PSN order)

    def advance(self, horizon: int) -> None:
        """Depart, in (ready, QP, PSN) order, every packet made so far that is ready before `horizon`."""
        queues, pos, lat = self.queues, self.pos, self.lat
        nq = len(queues)
        while True:
            best, when = -1, horizon
            for q in range(nq):  # the lowest QP wins a tie: strictly earlier only
                i = pos[q]
                qu = queues[q]
                if i < len(qu):
                    r = qu[i].ready
                    if r < when:
                        best, when = q, r
            if best < 0:
                return
            p = queues[best][pos[best]]
            pos[best] = pos[best] + 1
            self.free = depart(p, self.free, self.rate_div, lat[best])
            self.gone[best] = p.psn


def port_and_wire(queues: list[list[Packet]], port_rate_div: int, lat: list[int]) -> list[Packet]:
    """One port FIFO by ready time, then the wire: departure and arrival times, the packets in arrival order.

    `queues` holds each QP's packets in PSN order, ready times never decreasing (see the module's doc); the
    port sends them in (ready, QP, PSN) order, and they arrive in (arrival, departure, QP, PSN) order."""
    nq = len(queues)
    used, oq = 0, 0
    for q in range(nq):
        if queues[q]:
            used += 1
            oq = q
    if used == 0:
        return []
    if used == 1:  # one QP: port order and arrival order are its PSN order (the queue's own list: its owner,
        # the send queues of one epoch, is done with it)
        qu = queues[oq]
        free, la = 0, lat[oq]
        for p in qu:
            free = depart(p, free, port_rate_div, la)
        return qu
    sent = _depart(queues, port_rate_div, lat)
    la = lat[oq]
    for q in range(nq):
        if queues[q] and lat[q] != la:
            return _arrivals(queues)
    # one latency: each packet leaves after the one before it (the port is busy >= 2 ns a packet), so it
    # arrives after it too, and the port's order is the wire's
    return sent


def _active(queues: list[list[Packet]]) -> list[int]:
    """The QPs with packets, in QP order (a merge compares only their heads)."""
    return [q for q in range(len(queues)) if queues[q]]


def _depart(queues: list[list[Packet]], port_rate_div: int, lat: list[int]) -> list[Packet]:
    """Departure and arrival times, the port taking the packets in (ready, QP, PSN) order: that order."""
    sent: list[Packet] = []
    act = _active(queues)
    heads = [queues[q][0] for q in act]
    pos = [0] * len(act)
    free = 0
    k = len(act)
    while k > 1:
        best, p = 0, heads[0]
        for j in range(1, k):  # the lowest QP wins a tie: strictly earlier only (`act` is in QP order)
            h = heads[j]
            if h.ready < p.ready:
                best, p = j, h
        q = act[best]
        free = depart(p, free, port_rate_div, lat[q])
        sent.append(p)
        i = pos[best] + 1
        qu = queues[q]
        if i < len(qu):
            heads[best], pos[best] = qu[i], i
        else:  # that QP is done: the others keep their QP order
            act.pop(best)
            heads.pop(best)
            pos.pop(best)
            k -= 1
    q = act[0]
    qu = queues[q]
    la = lat[q]
    for i in range(pos[0], len(qu)):  # one QP left: its PSN order
        p = qu[i]
        free = depart(p, free, port_rate_div, la)
        sent.append(p)
    return sent


def _arrivals(queues: list[list[Packet]]) -> list[Packet]:
    """The packets in (arrival, departure, QP, PSN) order."""
    act = _active(queues)
    heads = [queues[q][0] for q in act]
    pos = [0] * len(act)
    out: list[Packet] = []
    k = len(act)
    while k > 1:
        best, p = 0, heads[0]
        for j in range(1, k):  # the lowest QP wins a tie: strictly earlier only (`act` is in QP order)
            h = heads[j]
            if h.arrive < p.arrive or (h.arrive == p.arrive and h.depart < p.depart):
                best, p = j, h
        out.append(p)
        i = pos[best] + 1
        qu = queues[act[best]]
        if i < len(qu):
            heads[best], pos[best] = qu[i], i
        else:
            act.pop(best)
            heads.pop(best)
            pos.pop(best)
            k -= 1
    qu = queues[act[0]]
    for i in range(pos[0], len(qu)):
        out.append(qu[i])
    return out
