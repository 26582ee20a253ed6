"""The copy-engine batch layer (epfuzz.model.cebatch): one test per clause, on the pass rules and on the
requester/responder that make what they judge (NCCL 9b6a9db2)."""

from __future__ import annotations

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.model.cebatch import CE_CLAUSES
from epfuzz.sim.pass_rules import packet_pass_rule, tlp_pass_rule
from epfuzz.sim.requester import post_and_send
from tests.sim_tlps import channel_tlps as _tlps

rule = tlp_pass_rule()
TESTED = {"CE-batch", "CE-stream", "CE-lanes", "CE-no-fabric"}


def _scn(num_qps: int = 1) -> Scenario:
    # strict posted writes (no RO): on one RDMA QP the table (A2a) would forbid every pass below
    return codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 1, "num_qps": num_qps},
                            "knobs": {"mr_relaxed": False}})


def test_every_clause_is_tested_here():
    assert set(CE_CLAUSES) == TESTED


def test_CE_batch_copies_of_one_batch_pass_each_other():
    data, sig1, sig2 = _tlps(_scn(), [ops.CeCopy(0, ops.DATA, 0, 64, 0), ops.CeValue(0, ops.SIGNAL, 0, 1, 0),
                                      ops.CeValue(0, ops.SIGNAL, 0, 2, 0)])
    assert (data.batch, sig1.batch, sig2.batch) == (0, 0, 0)
    assert rule(sig1, data) == "CE-batch"   # the signal before the data
    assert rule(sig2, sig1) == "CE-batch"   # the later sequence number first: the earlier one lands last
    w0, w1 = _tlps(_scn(), [ops.Write(0, ops.DATA, 0, 64), ops.WriteValue(0, ops.SIGNAL, 0, 1)])
    assert rule(w1, w0) is None             # the same bytes as RDMA WRITEs on one strict QP: A2a


def test_CE_stream_a_later_batch_never_passes_an_earlier_one():
    data, sig = _tlps(_scn(), [ops.CeCopy(0, ops.DATA, 0, 64, 0), ops.CeValue(0, ops.SIGNAL, 0, 1, 1)])
    assert rule(sig, data) is None


def test_CE_lanes_copies_on_different_lanes_are_unordered():
    t = _tlps(_scn(num_qps=2), [ops.CeCopy(0, ops.DATA, 0, 64, 0), ops.CeValue(1, ops.SIGNAL, 0, 1, 1)])
    data, sig = sorted(t, key=lambda x: x.seq)
    assert rule(sig, data) == "xQP"


def test_CE_no_fabric_adaptive_routing_moves_no_copy():
    _, pkts = post_and_send(_scn(), [[ops.CeCopy(0, ops.DATA, 0, 64, 0), ops.CeValue(0, ops.SIGNAL, 0, 1, 0)]],
                            0, 0, [0])
    data, sig = pkts
    assert packet_pass_rule(True)(sig, data) is None
    _, pkts = post_and_send(_scn(), [[ops.Write(0, ops.DATA, 0, 64), ops.WriteValue(0, ops.SIGNAL, 0, 1)]], 0, 0, [0])
    assert packet_pass_rule(True)(pkts[1], pkts[0]) == "AR"
