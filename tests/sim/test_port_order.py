"""The port and the wire order packets by (ready, QP, PSN), then by (arrival, departure, QP, PSN): sorted as
ints (`epfuzz.sim.port._order`), they must come out exactly as the tuple sort orders them."""

from __future__ import annotations

import random

from epfuzz.sim.packets import Packet
from epfuzz.sim.port import LINK_BYTES_PER_NS, MIN_PKT_BYTES, port_and_wire


def _reference(pkts: list[Packet], rate_div: int, lat: list[int]) -> list[tuple[int, int, int, int]]:
    """The tuple sorts the port used before issue 31, on copies of the packets' fields."""
    rows = sorted((p.ready, p.qp, p.psn, p.length) for p in pkts)
    free, out = 0, []
    for ready, qp, psn, length in rows:
        dep = max(ready, free)
        free = dep + max(length, MIN_PKT_BYTES) * rate_div // LINK_BYTES_PER_NS
        out.append((dep + lat[qp], dep, qp, psn))
    return sorted(out)


def _packets(rng: random.Random, nq: int) -> list[Packet]:
    psn = [rng.randrange(4) for _ in range(nq)]
    out = []
    for _ in range(rng.randrange(0, 40)):
        p = Packet()
        p.qp = rng.randrange(nq)
        p.psn = psn[p.qp]
        psn[p.qp] += 1
        p.ready = rng.choice([0, 5, 5, 100, rng.randrange(1 << 40)])  # ties in time, and times past 2**30
        p.length = rng.choice([0, 8, 64, 4096])
        out.append(p)
    rng.shuffle(out)
    return out


def test_port_and_wire_orders_as_the_tuple_sort() -> None:
    """Shuffled packets, and packets handed over in port order already with one latency for every QP or
    not (`port_and_wire` then skips a sort that would be the identity: it must find exactly when)."""
    rng = random.Random(31)
    for _ in range(3000):
        nq = rng.randrange(1, 6)
        lat = [rng.choice([0, 600, 650, 1 << 33]) for _ in range(nq)]
        if rng.random() < 0.4:
            lat = lat[:1] * nq
        pkts = _packets(rng, nq)
        if rng.random() < 0.5:
            pkts.sort(key=lambda p: (p.ready, p.qp, p.psn))
        rate_div = rng.randrange(1, 4)
        want = _reference(pkts, rate_div, lat)
        got = port_and_wire(pkts, rate_div, lat)
        assert [(p.arrive, p.depart, p.qp, p.psn) for p in got] == want
        assert got is pkts  # sorted in place: the requester's list is the one returned
