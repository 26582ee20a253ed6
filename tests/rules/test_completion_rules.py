"""What a Flush and a fence wait for: one test per `epfuzz.model.ordering.COMPLETION_CLAUSES` entry (issue 34.3).

The requester used to complete a WR at "ready + two latencies", as if its packets never waited
in the port queue; with two busy QPs sharing the port a Flush then completed before its data had
even reached the responder. These tests post op lists straight into the requester
(`epfuzz.sim.requester.post_and_send`) on scenarios whose two QPs keep the port busy.
"""

from __future__ import annotations

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.scenario import Overtake, Scenario
from epfuzz.model.ordering import COMPLETION_CLAUSES
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build, simulate
from epfuzz.sim.packets import FlushWait, Packet, Wr
from epfuzz.sim.requester import BASE_LATENCY_NS, post_and_send

TESTED = {"IB-ack", "IB-atomic-response", "IB-atomic-executed", "IB-sq-order", "IB-flush-qp", "IB-local-only",
          "IB-fence", "quiet-stale-frontier"}
BIG = 16384  # four 4 KiB packets


def _scn(**faults: object) -> Scenario:
    return codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 2, "num_qps": 2},
                            "faults": {"port_rate_div": 4, **faults}})


def _post(scn: Scenario, programs: list[list[ops.Op]]) -> tuple[list[Wr], list[Packet], list[FlushWait]]:
    flushes: list[FlushWait] = []
    wrs, pkts = post_and_send(scn, programs, 0, 0, [0] * scn.topology.num_qps, flushes)
    return wrs, pkts, flushes


def _last(pkts: list[Packet], wr: int) -> Packet:
    return max((p for p in pkts if p.wr == wr), key=lambda p: p.psn)


def test_every_clause_is_tested_here():
    assert set(COMPLETION_CLAUSES) == TESTED


def test_ib_ack_a_flush_waits_for_the_ack_of_its_last_packet_port_queue_included():
    """Both QPs stream 16 KiB through one port at a quarter of the link rate: the flushed WR's last
    packet leaves the port long after it was ready, and the Flush waits for that packet's ACK."""
    scn = _scn()
    wrs, pkts, (f,) = _post(scn, [[ops.Write(0, ops.DATA, 0, BIG), ops.Flush(0), ops.WriteValue(1, ops.SIGNAL, 0, 1)],
                                  [ops.Write(1, ops.DATA, BIG, BIG)]])
    last = _last(pkts, f.wr)
    assert f.clause == "IB-ack" and f.wr == 0
    assert f.done == last.arrive + BASE_LATENCY_NS          # arrival at the responder, then the ACK's way back
    assert last.depart > last.ready                          # it did wait in the port queue
    assert f.done > last.ready + 2 * BASE_LATENCY_NS         # the old estimate, which ignored that wait
    signal = next(w for w in wrs if isinstance(w.op, ops.WriteValue))
    assert signal.post == f.done


def test_ib_atomic_response_a_flush_after_an_atomic_waits_for_its_response():
    scn = _scn()
    _, pkts, (f,) = _post(scn, [[ops.Write(0, ops.DATA, 0, BIG), ops.AtomicAdd(0, ops.SIGNAL, 0, 1), ops.Flush(0)],
                                [ops.Write(1, ops.DATA, BIG, BIG)]])
    atomic = _last(pkts, f.wr)
    assert f.clause == "IB-atomic-response" and f.wr == 2
    assert f.done == atomic.arrive + BASE_LATENCY_NS


def test_ib_atomic_executed_a_wr_posted_after_the_atomics_response_never_passes_its_execution_tlp():
    """IBA 9.7: the atomic response carries the fetched value, so the responder executed the ATOMIC before the
    requester saw it complete (research anchors C: atomic completion implies earlier writes complete, DeepEP #83).
    A flag posted after a Flush (any QP) or a fence (its QP) that waited for it is behind the atomic's MemRd
    (mode 0) or AtomicOp (mode 4); that TLP's own cell says what of the data it covers: B2a all (RO or not), C2b
    not the RO data in mode 4. Mode 0's write-back MemWr is no execution TLP (the response does not wait for it).
    (A protocol author's trial, 2026-12-05, H1: the flag passed the MemRd, a false alarm on a strict MR.)"""
    from epfuzz.sim.packets import TlpAction
    from epfuzz.sim.pass_rules import tlp_pass_rule
    from tests.sim_tlps import channel_tlps

    rule = tlp_pass_rule()
    for mode in (0, 4):
        scn = codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 1, "num_qps": 2},
                               "knobs": {"mr_relaxed": True, "nic_relaxed_ordering": True, "atomic_mode": mode}})
        data = ops.Write(0, ops.DATA, 0, 64)
        faa = ops.AtomicAdd(0, ops.RECV, 0, 0)
        for prog, waited in (([data, faa, ops.Flush(0), ops.WriteValue(1, ops.SIGNAL, 0, 1)], True),
                             ([data, faa, ops.WriteValue(1, ops.SIGNAL, 0, 1)], False),
                             ([data, faa, ops.WriteValue(0, ops.SIGNAL, 0, 1, fence=True)], True)):
            t = channel_tlps(scn, prog)
            d, x, flag = t[0], t[1], t[-1]
            assert x.wr == 1 and (x.action, x.dep) == ((TlpAction.READ, -1) if mode == 0 else (TlpAction.ADD, -1))
            cross = flag.qp != x.qp
            if waited:
                assert flag.acked[0] == x.wr and rule(flag, x) is None
            else:
                assert not flag.acked and rule(flag, x) == "xQP"
            assert rule(x, d) == (None if mode == 0 else "C2b")      # B2a; C2b (RO MR and NIC)
            assert rule(flag, d) == ("xQP" if cross else "A2b")      # alone it could: x holds it back
            if mode == 0:                                            # the write-back: not what the response needed
                assert t[2].dep == x.seq and rule(flag, t[2]) == ("xQP" if cross else "A2b")


def test_ib_sq_order_a_flush_waits_for_the_qps_last_wr_whoever_posted_it():
    """Channel 0 posts 16 KiB on QP 0; channel 1 posts 64 bytes on QP 0 and flushes: the small WR
    completes behind the big one, so the Flush covers channel 0's WR too. A WR posted on the QP
    after the Flush (channel 0's second) is not waited for."""
    scn = _scn()
    wrs, pkts, (f,) = _post(scn, [[ops.Write(0, ops.DATA, 0, BIG), ops.Spin(10), ops.Write(0, ops.DATA, BIG, BIG)],
                                  [ops.Write(0, ops.DATA, 2 * BIG, 64), ops.Flush(0)]])
    assert f.channel == 1 and f.wr == 1
    big, small, later = (_last(pkts, w.id) for w in wrs)
    assert small.arrive > big.arrive                          # completions in post order on one send queue
    assert f.done == small.arrive + BASE_LATENCY_NS >= big.arrive + BASE_LATENCY_NS
    assert later.arrive + BASE_LATENCY_NS > f.done            # posted after the Flush: not waited for


def test_quiet_stale_frontier_waits_for_none_of_the_channels_own_wrs():
    """Channel 0 posts 16 KiB on QP 0; channel 1 posts on QP 0 after it and quiets on a stale frontier: it
    waits for channel 0's WR (posted before its own first) and not for its own; alone on the QP, for
    nothing. The live Flush in the same place waits for the channel's own WR."""
    scn = _scn()
    progs: list[list[ops.Op]] = [[ops.Write(0, ops.DATA, 0, BIG)],
                                 [ops.Spin(5), ops.Write(0, ops.DATA, BIG, BIG), ops.Flush(0, stale=True)]]
    wrs, pkts, (f,) = _post(scn, progs)
    assert f.clause == "quiet-stale-frontier" and f.wr == 0
    assert f.done == _last(pkts, 0).arrive + BASE_LATENCY_NS < _last(pkts, 1).arrive + BASE_LATENCY_NS
    alone = _post(scn, [[ops.Write(0, ops.DATA, 0, BIG), ops.Flush(0, stale=True)]])[2][0]
    assert alone.clause == "quiet-stale-frontier" and alone.wr == -1 and alone.done == alone.at
    live = _post(scn, [progs[0], [ops.Spin(5), ops.Write(0, ops.DATA, BIG, BIG), ops.Flush(0)]])[2][0]
    assert live.wr == 1 and live.clause == "IB-ack"


def test_ib_flush_qp_a_flush_waits_for_its_own_qp_only():
    scn = _scn(qp_rate_div=[1, 16])
    wrs, pkts, (f,) = _post(scn, [[ops.Write(1, ops.DATA, 0, BIG)],
                                  [ops.Write(0, ops.DATA, BIG, 64), ops.Flush(0)]])
    slow = _last(pkts, 0)
    assert f.wr == 1 and f.qp == 0
    assert f.done < slow.arrive                               # QP 1's 16 KiB is still on its way
    assert _post(scn, [[ops.Flush(0)]])[2][0].clause == ""    # nothing posted on the QP: nothing to wait for


def test_ib_local_only_a_flushed_write_may_still_become_visible_after_the_next_qps_signal():
    """flush_other_qp: the Flush puts the data's packets at the responder before the signal is even
    posted (arrival order is safe), yet the signal's TLP on the other QP may become visible first."""
    proto = get_protocol("flush_other_qp")
    scn = codec.load_dict({"protocol": "flush_other_qp", "payload": {"num_tokens": 1, "hidden_bytes": 1024},
                           "topology": {"num_qps": 2}, "chunking": {"max_payload": 256}})
    run = build(scn, proto)
    (f,) = run.flushes
    data_last = max(p.arrive for p in run.packets if p.wr == f.wr)
    signal = run.wrs[-1]
    assert isinstance(signal.op, ops.AtomicAdd) and signal.qp != f.qp and signal.post >= data_last
    assert simulate(scn, proto).violation is None
    n = sum(t.n for t in run.tlps)
    # the fetch-and-add is a MemRd then its MemWr (PCI atomic mode 0): both move before the data
    found = simulate(scn.replace(schedule=(Overtake("pcie", n - 2, 64), Overtake("pcie", n - 1, 64))), proto)
    assert found.violation is not None and found.culprit_rules() == {"xQP"}


def test_ib_fence_waits_for_the_qps_earlier_atomic_response_not_its_writes():
    scn = _scn()
    busy = [ops.Write(1, ops.DATA, BIG, BIG)]
    wrs, pkts, _ = _post(scn, [[ops.Write(0, ops.DATA, 0, BIG), ops.AtomicAdd(0, ops.SIGNAL, 0, 1),
                                ops.WriteValue(0, ops.SIGNAL, 8, 1, fence=True)], busy])
    atomic, fenced = _last(pkts, 2), wrs[3]
    assert atomic.depart > atomic.ready                       # queued behind both QPs' data at the port
    assert fenced.start == atomic.arrive + BASE_LATENCY_NS    # the response, port queue included
    wrs, pkts, _ = _post(scn, [[ops.Write(0, ops.DATA, 0, BIG), ops.WriteValue(0, ops.SIGNAL, 8, 1, fence=True)],
                               busy])
    assert wrs[2].start < _last(pkts, 0).arrive               # no ATOMIC before it: the WRITE is not waited for


def test_ib_ack_packets_posted_after_a_flush_never_arrive_before_what_it_waited_for():
    """A Flush's completion (the ACK of its QP's last WR) means every packet of that QP's WRs up to it has
    arrived, so with adaptive routing a WR the channel posts afterwards cannot pass them on the network;
    it may still pass what it did not wait for: another QP's data, or a WR posted after the Flush.
    (A protocol author's trial, 2026-12-04: write, Flush, flag on a strict MR was a false AR finding.)"""
    from epfuzz.sim.pass_rules import known_arrived, packet_pass_rule

    scn = _scn(qp_delay_ns=(0, 900))
    wrs, pkts, (f,) = _post(scn, [[ops.Write(0, ops.DATA, 0, BIG), ops.Flush(0), ops.WriteValue(0, ops.SIGNAL, 0, 1),
                                   ops.WriteValue(0, ops.SIGNAL, 8, 1)],
                                  [ops.Write(1, ops.DATA, BIG, BIG)]])
    rule = packet_pass_rule(True)
    data = [p for p in pkts if p.wr == f.wr]
    flag, flag2 = (p for p in pkts if p.kind == 1)  # PacketKind.VALUE
    other = [p for p in pkts if p.qp == 1]
    assert len(data) == 4 and flag.acked[0] == f.wr and flag2.acked is flag.acked
    assert all(rule(flag, d) is None and known_arrived(flag, d) for d in data)
    assert all(rule(flag, o) == "cross-QP" for o in other)           # channel 1's QP: not waited for
    assert rule(flag2, flag) == "AR"                                  # posted after the Flush: no ACK seen
    assert all(not p.acked for p in data + other)                     # posted before any completion


def test_ib_ack_a_write_flush_flag_protocol_is_clean_under_adaptive_routing():
    """End to end: WRITE, Flush, then the flag on the same QP and a strict MR is never accepted early,
    whatever net schedule the adversary draws; without the Flush adaptive routing finds the early accept."""
    import random

    from epfuzz.protocols.gather import GatherReceiver, PathProtocol

    def sender(flush: bool):  # type: ignore[no-untyped-def]
        def make(scn, layout, epoch):  # type: ignore[no-untyped-def]
            progs = []
            for c in range(layout.num_channels):
                qp = scn.qp_of_channel(c)
                n = layout.tokens_in_channel[c] * layout.token_bytes
                progs.append([ops.Write(qp, ops.DATA, layout.slot_offset(c, 0), n)]
                             + ([ops.Flush(qp)] if flush else []) + [ops.WriteValue(qp, ops.SIGNAL, c * 8, 1)])
            return progs
        return make

    def proto(flush: bool) -> PathProtocol:
        return PathProtocol(f"ackflag{int(flush)}", "", {"knobs.mr_relaxed": False}, "clean", ("test",),
                            sender(flush), lambda s, lay: GatherReceiver(s, lay, lambda w, c, e: w == 1))

    rng = random.Random(5)
    found = {True: 0, False: 0}
    for flush in (True, False):
        p = proto(flush)
        for _ in range(300):
            scn = codec.load_dict({"protocol": "dispatch_any", "knobs": {"adaptive_routing": True},
                                   "payload": {"num_tokens": rng.randrange(1, 5), "hidden_bytes": 4096},
                                   "chunking": {"mtu": 1024},
                                   "schedule": [{"stage": "net", "index": rng.randrange(64),
                                                 "distance": rng.randrange(1, 64)} for _ in range(3)]})
            found[flush] += simulate(scn, p).violation is not None
    assert found[True] == 0 and found[False] > 0, found


def test_ib_fence_a_fenced_wr_never_arrives_before_what_the_atomic_it_waited_for_needed():
    """IBV_SEND_FENCE holds a WR until the QP's earlier ATOMIC has completed: its response came back only
    once the responder had executed it behind every earlier packet of the QP (o9-20), so under adaptive
    routing the fenced WR passes none of them; an unfenced one may."""
    from epfuzz.sim.pass_rules import packet_pass_rule

    scn = _scn()
    for fence in (True, False):
        _, pkts, _ = _post(scn, [[ops.Write(0, ops.DATA, 0, BIG), ops.AtomicAdd(0, ops.SIGNAL, 0, 1),
                                  ops.WriteValue(0, ops.SIGNAL, 8, 1, fence=fence)], []])
        data = [p for p in pkts if p.kind == 0]  # PacketKind.WRITE
        atomic = next(p for p in pkts if p.kind == 2)
        flag = next(p for p in pkts if p.kind == 1)
        rule = packet_pass_rule(True)
        assert all(rule(flag, x) == (None if fence else "AR") for x in [*data, atomic])
