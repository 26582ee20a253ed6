"""The send queues hand the port each QP's packets in PSN order with ready times that never decrease within an
epoch: the assumption the port's and the wire's merges rest on (`epfuzz.sim.port`), checked on random built
forms of every built-in protocol (fences, Flushes, READs, several QPs, throttled QPs), so that a send queue
that started a WR before the QP's last one was done, or numbered a QP's packets out of order, fails here."""

from __future__ import annotations

import random

from epfuzz.encoding import codec
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.sim.built import build_form
from epfuzz.sim.packets import Packet


def _per_qp(pkts: list[Packet]) -> dict[tuple[int, int], list[Packet]]:
    """The packets of each (epoch, QP), in PSN order."""
    out: dict[tuple[int, int], list[Packet]] = {}
    for p in pkts:
        out.setdefault((p.epoch, p.qp), []).append(p)
    for qu in out.values():
        qu.sort(key=lambda p: p.psn)
    return out


def test_each_qps_packets_are_ready_in_psn_order() -> None:
    rng = random.Random(20261205)
    names = sorted(BUILTIN)
    multi, fenced = 0, 0
    for _ in range(600):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 160)))
        scn = codec.decode(data, rng.choice(names))
        form = build_form(scn, get_protocol(scn.protocol))
        queues = _per_qp(form.packets)
        multi += len({q for _, q in queues}) > 1
        fenced += any(w.fence_read >= 0 or w.acked for w in form.wrs)
        nxt: dict[int, int] = {}
        for (epoch, qp), qu in sorted(queues.items()):
            # PSNs run on across epochs, one per packet, none skipped or repeated
            assert [p.psn for p in qu] == list(range(nxt.get(qp, 0), nxt.get(qp, 0) + len(qu))), (epoch, qp)
            nxt[qp] = qu[-1].psn + 1
            ready = [p.ready for p in qu]
            assert ready == sorted(ready), (scn.protocol, data.hex(), epoch, qp, ready)
            # and each WR's packets are consecutive in its QP's order, its last one last
            wrs = [p.wr for p in qu]
            assert wrs == sorted(wrs), (scn.protocol, data.hex(), epoch, qp)
            assert all(p.last == (i + 1 == len(qu) or qu[i + 1].wr != p.wr) for i, p in enumerate(qu))
    assert multi > 100 and fenced > 50  # the cases that could break it were met
