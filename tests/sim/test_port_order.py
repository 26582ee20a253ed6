"""The port and the wire order packets by (ready, QP, PSN), then by (arrival, departure, QP, PSN): merged from
the per-QP send queues (`epfuzz.sim.port`), they must come out exactly as the tuple sorts order them, and the
port departed step by step (`Port.advance`, what a Flush or a fence reads) must give the same times."""

from __future__ import annotations

import random

from epfuzz.sim.packets import Packet
from epfuzz.sim.port import LINK_BYTES_PER_NS, MIN_PKT_BYTES, Port, port_and_wire


def _reference(pkts: list[Packet], rate_div: int, lat: list[int]) -> list[tuple[int, int, int, int]]:
    """The tuple sorts the port used before issue 31, on copies of the packets' fields."""
    rows = sorted((p.ready, p.qp, p.psn, p.length) for p in pkts)
    free, out = 0, []
    for ready, qp, psn, length in rows:
        dep = max(ready, free)
        free = dep + max(length, MIN_PKT_BYTES) * rate_div // LINK_BYTES_PER_NS
        out.append((dep + lat[qp], dep, qp, psn))
    return sorted(out)


def _queues(rng: random.Random, nq: int) -> list[list[Packet]]:
    """Per QP, packets in PSN order whose ready times never decrease (what a send queue makes), with ties in
    time within and across QPs, times past 2**30, and QPs with no packet."""
    out: list[list[Packet]] = []
    for q in range(nq):
        psn = rng.randrange(4)
        times = sorted(rng.choice([0, 5, 5, 100, rng.randrange(1 << 40)]) for _ in range(rng.randrange(0, 15)))
        qu = []
        for t in times:
            p = Packet()
            p.qp, p.psn, p.ready, p.length = q, psn, t, rng.choice([0, 8, 64, 4096])
            psn += 1
            qu.append(p)
        out.append(qu)
    return out


def test_port_and_wire_orders_as_the_tuple_sort() -> None:
    """Random queues, one latency for every QP or not, one QP in use or several."""
    rng = random.Random(31)
    for _ in range(3000):
        nq = rng.randrange(1, 9)
        lat = [rng.choice([0, 600, 650, 1 << 33]) for _ in range(nq)]
        if rng.random() < 0.4:
            lat = lat[:1] * nq
        queues = _queues(rng, nq)
        if rng.random() < 0.3:  # one QP in use (the requester's common case: its own path)
            keep = rng.randrange(nq)
            queues = [qu if q == keep else [] for q, qu in enumerate(queues)]
        rate_div = rng.randrange(1, 4)
        want = _reference([p for qu in queues for p in qu], rate_div, lat)
        got = port_and_wire(queues, rate_div, lat)
        assert [(p.arrive, p.depart, p.qp, p.psn) for p in got] == want


def test_the_port_departed_step_by_step_gives_the_final_times() -> None:
    """`Port.advance` to rising horizons, the queues growing between (as WRs start), departs each packet at
    the time `port_and_wire` gives it, and in its order: `gone` follows each QP's PSNs."""
    rng = random.Random(7)
    for _ in range(1000):
        nq = rng.randrange(1, 9)
        lat = [rng.choice([0, 600, 650]) for _ in range(nq)]
        full = _queues(rng, nq)
        rate_div = rng.randrange(1, 4)
        queues: list[list[Packet]] = [[] for _ in range(nq)]
        port = Port(rate_div, lat, queues)
        # packets join in ready order (every packet made later is ready after the horizon departed to)
        pending = sorted((p for qu in full for p in qu), key=lambda p: (p.ready, p.qp, p.psn))
        for p in pending:
            port.advance(p.ready)
            queues[p.qp].append(p)
            assert all(port.gone[q] < x.psn for q in range(nq) for x in queues[q][port.pos[q]:])
        port.advance(1 << 61)
        steps = {id(p): (p.depart, p.arrive) for qu in queues for p in qu}
        assert all(port.pos[q] == len(queues[q]) for q in range(nq))
        port_and_wire(queues, rate_div, lat)
        assert steps == {id(p): (p.depart, p.arrive) for qu in queues for p in qu}
