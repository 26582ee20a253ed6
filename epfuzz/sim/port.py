"""The requester's port and the wire: packets of all QPs leave one port FIFO by ready time, then cross the
wire (split from `epfuzz.sim.requester`, whose send queues decide the ready times)."""

from __future__ import annotations

import heapq
from typing import Final

from epfuzz.sim.packets import Packet

# Final: C statics in the compiled module (a plain imported name is a module-dict lookup per call)
heappush: Final = heapq.heappush
heappop: Final = heapq.heappop

# Final: mypyc compiles them in, where a module global is a dict lookup per packet
LINK_BYTES_PER_NS: Final = 25  # 200 Gb/s
MIN_PKT_BYTES: Final = 64      # headers: even a zero-length packet takes wire time


class Port:
    """The port FIFO, departed as far as it is decided: what a Flush or a fence needs to know early.

    Packets leave in (ready, QP, PSN) order, as `port_and_wire` sends them; a packet's departure
    is final once no packet with an earlier ready time can still be made, i.e. for ready times
    below the `horizon` the caller passes (every packet made later is ready after it).
    `port_and_wire` recomputes the same times for the whole epoch afterwards.
    """

    def __init__(self, rate_div: int, lat: list[int]) -> None:
        self.rate_div, self.lat = rate_div, lat
        self.heap: list[tuple[int, int, int, int]] = []  # (ready, qp, psn, index into items)
        self.items: list[Packet] = []
        self.free = 0
        self.gone = [-1] * len(lat)  # per QP, the PSN of its last departed packet (a QP departs in PSN order)

    def add(self, p: Packet) -> None:
        heappush(self.heap, (p.ready, p.qp, p.psn, len(self.items)))
        self.items.append(p)

    def advance(self, horizon: int) -> None:
        heap, items, lat = self.heap, self.items, self.lat
        while heap and heap[0][0] < horizon:
            p = items[heappop(heap)[3]]
            dep = p.ready if p.ready > self.free else self.free
            self.free = dep + max(p.length, MIN_PKT_BYTES) * self.rate_div // LINK_BYTES_PER_NS
            p.depart, p.arrive = dep, dep + lat[p.qp]
            self.gone[p.qp] = p.psn


def port_and_wire(pkts: list[Packet], port_rate_div: int, lat: list[int]) -> list[Packet]:
    """One port FIFO by ready time, then the wire: departure and arrival times, in arrival order.

    `pkts` is sorted in place, by (ready, QP, PSN), then by (arrival, departure, QP, PSN). Each order
    is a sort of plain ints (`_order`): a key tuple per packet read through attribute getters cost
    more than the rest of the requester's port and wire together (issue 31)."""
    nq = len(lat)
    if not _in_port_order(pkts):
        ps = 0
        for p in pkts:
            if p.psn >= ps:
                ps = p.psn + 1
        pkts[:] = _order(pkts, [(p.ready * nq + p.qp) * ps + p.psn for p in pkts])
    port_free = 0
    for p in pkts:
        p.depart = p.ready if p.ready > port_free else port_free
        port_free = p.depart + max(p.length, MIN_PKT_BYTES) * port_rate_div // LINK_BYTES_PER_NS
        p.arrive = p.depart + lat[p.qp]
    if not _in_arrival_order(pkts):
        ps = 0
        span = 0  # departures are >= 0 (the port is free from 0 on): a mixed-radix digit, base max + 1
        for p in pkts:
            if p.psn >= ps:
                ps = p.psn + 1
            if p.depart >= span:
                span = p.depart + 1
        pkts[:] = _order(pkts, [((p.arrive * span + p.depart) * nq + p.qp) * ps + p.psn for p in pkts])
    return pkts


def _in_port_order(pkts: list[Packet]) -> bool:
    """Whether `pkts` ascend by (ready, QP, PSN) already (half of the epochs of random scenarios do): then
    the sort is the identity, and its keys (a boxed int per packet, twice) are not made."""
    for i in range(1, len(pkts)):
        a, b = pkts[i - 1], pkts[i]
        if a.ready != b.ready:
            if a.ready > b.ready:
                return False
        elif a.qp != b.qp:
            if a.qp > b.qp:
                return False
        elif a.psn >= b.psn:
            return False
    return True


def _in_arrival_order(pkts: list[Packet]) -> bool:
    """Whether `pkts` ascend by (arrival, departure, QP, PSN) already: in port order they do unless the
    QPs' latencies differ (departures strictly increase, so with one latency arrivals do too)."""
    for i in range(1, len(pkts)):
        a, b = pkts[i - 1], pkts[i]
        if a.arrive != b.arrive:
            if a.arrive > b.arrive:
                return False
        elif a.depart != b.depart:
            if a.depart > b.depart:
                return False
        elif a.qp != b.qp:
            if a.qp > b.qp:
                return False
        elif a.psn >= b.psn:
            return False
    return True


def _order(pkts: list[Packet], keys: list[int]) -> list[Packet]:
    """`pkts` by ascending `keys`, each a packet's sort tuple as one int (a mixed radix: every digit but the
    first is below its base, QP < QPs and PSN < max PSN + 1, so the ints order as the tuples do; the tuples
    are distinct, (QP, PSN) is, so no tie is left to stability). The index rides in the lowest digit."""
    n = len(pkts)
    dec = [k * n + i for i, k in enumerate(keys)]
    dec.sort()
    return [pkts[k % n] for k in dec]
