"""The RDMA READ layer (epfuzz.model.rdma_read): one test per clause, each on the pass rule and on the
requester/responder that make the TLPs it judges."""

from __future__ import annotations

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.model.ordering import Attrs, TlpType
from epfuzz.model.rdma_read import READ_CLAUSES
from epfuzz.sim.packets import LocalStore, PacketKind, Tlp, TlpAction
from epfuzz.sim.pass_rules import packet_pass_rule, tlp_pass_rule
from epfuzz.sim.requester import post_and_send
from epfuzz.sim.responder import respond
from tests.sim_tlps import channel_tlps as _tlps

rule = tlp_pass_rule()
TESTED = {"B2a", "B2b", "xQP", "IB-read-unfenced", "IB-fence-read", "IB-read-response"}


def tlp(seq: int, *, wr: int, type: TlpType = TlpType.POSTED, action: TlpAction = TlpAction.COPY, ro: bool = False,
        ido: bool = False, rid: int = 0, qp: int = 0, after: int = -1, fence_read: int = -1) -> Tlp:
    t = Tlp()
    t.seq, t.n, t.mps, t.epoch, t.action, t.qp = seq, 1, 256, 0, action, qp
    t.attrs = Attrs(type, ro=ro, ido=ido, rid=rid)
    t.region, t.off, t.length, t.value, t.dep, t.hold, t.pkt, t.wr = "data", 0, 16, 0, -1, False, 0, wr
    t.target, t.local, t.after, t.fence_read = 0, LocalStore.NONE, after, fence_read
    return t


def memrd(seq: int, wr: int, **kw: object) -> Tlp:
    return tlp(seq, wr=wr, type=TlpType.READ, action=TlpAction.FETCH, **kw)  # type: ignore[arg-type]


def _scn(num_qps: int = 1, **knobs: object) -> Scenario:
    return codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 1, "num_qps": num_qps},
                            "knobs": {"mr_relaxed": True, "nic_relaxed_ordering": True, **knobs}})


def test_every_clause_is_tested_here():
    assert set(READ_CLAUSES) == TESTED


def test_B2a_a_read_sees_every_earlier_write_of_its_qp():
    """RO does not let the MemRd pass the QP's earlier data: a READ reads what its QP wrote before it."""
    assert rule(memrd(1, wr=1), tlp(0, wr=0, ro=True)) is None
    t = _tlps(_scn(), [ops.Write(0, ops.DATA, 0, 64), ops.Read(0, ops.DATA, 56, 8)])
    rd = [x for x in t if x.action == TlpAction.FETCH]
    assert len(rd) == 1 and rd[0].attrs.type == TlpType.READ and not rd[0].attrs.ro
    assert rule(rd[0], t[0]) is None


def test_B2b_ido_with_different_requester_ids_lets_a_read_pass():
    assert rule(memrd(1, wr=1, ido=True, rid=1), tlp(0, wr=0, rid=0)) == "B2b"
    assert rule(memrd(1, wr=1, ido=True, rid=0), tlp(0, wr=0, rid=0)) is None  # one QP: one requester ID


def test_xQP_a_read_on_another_qp_orders_nothing_of_the_data_qp():
    assert rule(memrd(1, wr=1, qp=1), tlp(0, wr=0, qp=0)) == "xQP"


def test_IB_read_unfenced_a_later_write_may_take_effect_before_the_read():
    """A3 at PCIe (posted must be able to pass a read), named for the IB clause that allows it on one QP."""
    assert rule(tlp(2, wr=2), memrd(1, wr=1)) == "IB-read-unfenced"
    assert rule(tlp(2, wr=2, type=TlpType.READ, action=TlpAction.FETCH), memrd(1, wr=1)) == "IB-read-unfenced"  # B3
    t = _tlps(_scn(), [ops.Read(0, ops.DATA, 0, 8), ops.WriteValue(0, ops.SIGNAL, 0, 1)])
    assert t[1].after == t[1].fence_read == -1 and rule(t[1], t[0]) == "IB-read-unfenced"


def test_IB_fence_read_a_fenced_wr_never_passes_the_reads_memrd():
    assert rule(tlp(2, wr=2, ro=True, fence_read=1), memrd(1, wr=1)) is None
    scn = _scn()
    _, pkts = post_and_send(scn, [[ops.Read(0, ops.DATA, 0, 8), ops.WriteValue(0, ops.SIGNAL, 0, 1, fence=True)]],
                            0, 0, [0])
    rd, flag = pkts
    assert rd.kind == PacketKind.READ and flag.fence_read == rd.wr
    assert flag.ready > rd.arrive  # the fence waited for the READ's response (IB-fence)
    # on the network too: a packet sent after the response never arrives before the READ, even with AR
    assert packet_pass_rule(True)(flag, rd) is None
    t = _tlps(scn, [ops.Read(0, ops.DATA, 0, 8), ops.WriteValue(0, ops.SIGNAL, 0, 1, fence=True)])
    assert t[1].fence_read == t[0].wr and rule(t[1], t[0]) is None


def test_IB_read_response_a_flush_waits_for_the_read_and_orders_the_channels_later_wrs():
    scn = _scn(num_qps=2)
    prog: list[ops.Op] = [ops.Read(1, ops.DATA, 0, 8), ops.Flush(1), ops.WriteValue(0, ops.SIGNAL, 0, 1)]
    flushes: list = []
    wrs, pkts = post_and_send(scn, [prog], 0, 0, [0, 0], flushes)
    (f,) = flushes
    rd = next(p for p in pkts if p.kind == PacketKind.READ)
    assert f.clause == "IB-read-response" and f.done >= rd.arrive
    flag = next(p for p in pkts if p.kind == PacketKind.VALUE)
    assert flag.after == rd.wr  # another QP, but posted once the READ had completed
    assert rule(tlp(2, wr=flag.wr, qp=0, after=rd.wr), memrd(1, wr=rd.wr, qp=1)) is None
    # without the Flush the flag is not behind the READ: xQP
    _, pkts = post_and_send(scn, [[prog[0], prog[2]]], 0, 0, [0, 0])
    assert all(p.after == -1 for p in pkts)


def test_a_read_wakes_no_receiver():
    from epfuzz.sim.receive import _touched

    assert _touched(memrd(0, wr=0), None) == (0, 0)


def test_packets_of_a_read_are_executed_in_psn_order():
    """The responder holds a READ until every earlier packet of its QP has arrived, like an ATOMIC."""
    scn = _scn(adaptive_routing=True)
    _, pkts = post_and_send(scn, [[ops.Write(0, ops.DATA, 0, 64), ops.Read(0, ops.DATA, 0, 8)]], 0, 0, [0])
    data, rd = pkts
    for i, p in enumerate((rd, data)):  # the READ arrives first (adaptive routing)
        p.seq = i
    t = respond(scn, [rd, data], 4, 0)
    assert [x.action for x in t] == [TlpAction.COPY, TlpAction.FETCH]


def test_IB_fence_read_covers_a_read_before_a_later_atomic():
    """READ, ATOMIC, then a fenced WRITE: the fence waits for both, so the WRITE stays behind the READ too."""
    _, pkts = post_and_send(_scn(), [[ops.Read(0, ops.DATA, 0, 8), ops.AtomicAdd(0, ops.SIGNAL, 0, 1),
                                      ops.WriteValue(0, ops.SIGNAL, 8, 1, fence=True)]], 0, 0, [0])
    rd, _, flag = pkts
    assert flag.fence_read == rd.wr
