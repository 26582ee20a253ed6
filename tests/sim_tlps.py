"""What the requester and responder make of one channel's ops: the TLPs a rule test judges (tests/rules)."""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.sim.packets import Tlp
from epfuzz.sim.requester import post_and_send
from epfuzz.sim.responder import respond


def channel_tlps(scn: Scenario, prog: list[ops.Op]) -> list[Tlp]:
    """One channel's program through the requester (packets numbered in arrival order) and the responder."""
    _, pkts = post_and_send(scn, [prog], 0, 0, [0] * scn.topology.num_qps)
    for i, p in enumerate(pkts):
        p.seq = i
    return respond(scn, pkts, 4, 0)
