"""The requester's port and the wire: packets of all QPs leave one port FIFO by ready time, then cross the
wire (split from `epfuzz.sim.requester`, whose send queues decide the ready times)."""

from __future__ import annotations

import heapq
from operator import attrgetter

from epfuzz.sim.packets import Packet

LINK_BYTES_PER_NS = 25  # 200 Gb/s
MIN_PKT_BYTES = 64      # headers: even a zero-length packet takes wire time

# sort keys as C-level attribute getters (the same tuples the lambdas built, without a Python call per packet)
_BY_READY, _BY_ARRIVAL = attrgetter("ready", "qp", "psn"), attrgetter("arrive", "depart", "qp", "psn")


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
        heapq.heappush(self.heap, (p.ready, p.qp, p.psn, len(self.items)))
        self.items.append(p)

    def advance(self, horizon: int) -> None:
        heap, items, lat = self.heap, self.items, self.lat
        while heap and heap[0][0] < horizon:
            p = items[heapq.heappop(heap)[3]]
            dep = p.ready if p.ready > self.free else self.free
            self.free = dep + max(p.length, MIN_PKT_BYTES) * self.rate_div // LINK_BYTES_PER_NS
            p.depart, p.arrive = dep, dep + lat[p.qp]
            self.gone[p.qp] = p.psn


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
