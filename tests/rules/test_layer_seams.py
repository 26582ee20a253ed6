"""Where issue 30's layers meet (found by review after the two branches were merged): a stale quiet with a
READ, a fence with a Flush's READ, and the source layer with copy-engine copies and the mixed plane."""

from __future__ import annotations

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.sim.pass_rules import tlp_pass_rule
from epfuzz.sim.requester import post_and_send
from epfuzz.sim.responder import respond


def _scn(num_channels: int = 1, num_qps: int = 1, preset: str = "spec") -> Scenario:
    return codec.load_dict({"protocol": "dispatch_any", "preset": preset,
                            "topology": {"num_channels": num_channels, "num_qps": num_qps},
                            **({} if preset != "spec" else
                               {"knobs": {"mr_relaxed": True, "nic_relaxed_ordering": True}})})


def test_a_stale_quiet_marks_no_wr_behind_a_read_it_did_not_wait_for():
    """Channel 1's stale quiet drains to the QP's index before its own first WR (channel 0's write): its READ
    is not waited for, so the flag after it is behind no READ (it was marked behind the QP's latest)."""
    scn = _scn(num_channels=2)
    wrs, _ = post_and_send(scn, [[ops.Write(0, ops.DATA, 0, 64)],
                                 [ops.Write(0, ops.DATA, 64, 64), ops.Read(0, ops.DATA, 120, 8),
                                  ops.Flush(0, stale=True), ops.WriteValue(0, ops.SIGNAL, 8, 1)]], 0, 0, [0])
    flag = next(w for w in wrs if isinstance(w.op, ops.WriteValue))
    assert flag.after == -1, flag.after
    # a quiet of the live index waits for the READ: the flag is behind it
    wrs, _ = post_and_send(scn, [[ops.Write(0, ops.DATA, 0, 64)],
                                 [ops.Write(0, ops.DATA, 64, 64), ops.Read(0, ops.DATA, 120, 8),
                                  ops.Flush(0), ops.WriteValue(0, ops.SIGNAL, 8, 1)]], 0, 0, [0])
    read = next(w for w in wrs if isinstance(w.op, ops.Read))
    assert next(w for w in wrs if isinstance(w.op, ops.WriteValue)).after == read.id


def test_a_fenced_wr_stays_behind_its_channels_flushed_read_and_its_qps_read():
    """A flag fenced on QP 0 (behind QP 0's READ) posted after a Flush that waited for QP 1's READ: one field
    kept only the fence's READ, so the flag could pass QP 1's MemRd (a false alarm)."""
    scn = _scn(num_qps=2)
    prog = [ops.Read(0, ops.DATA, 0, 8), ops.Write(1, ops.DATA, 64, 64), ops.Read(1, ops.DATA, 120, 8),
            ops.Flush(1), ops.WriteValue(0, ops.SIGNAL, 0, 1, fence=True)]
    wrs, pkts = post_and_send(scn, [prog], 0, 0, [0, 0])
    r0, r1 = (w.id for w in wrs if isinstance(w.op, ops.Read))
    flag = next(w for w in wrs if isinstance(w.op, ops.WriteValue))
    assert (flag.after, flag.fence_read) == (r1, r0)
    for i, p in enumerate(pkts):
        p.seq = i
    tlps = respond(scn, pkts, 4, 0)
    rule = tlp_pass_rule()
    flag_tlp = next(t for t in tlps if t.wr == flag.id)
    for r in (r0, r1):
        memrd = next(t for t in tlps if t.wr == r)
        assert rule(flag_tlp, memrd) is None, r


def test_copy_engine_copies_are_no_nic_dma_reads_of_the_send_buffer():
    """A send buffer stored without a GPU flush makes a NIC's DMA read stale (SRC-unflushed); a copy engine's
    copy of it is not a NIC read, and landed as zeros."""
    scn = _scn()
    _, pkts = post_and_send(scn, [[ops.SrcStore(0, 64), ops.CeCopy(0, ops.DATA, 0, 64, 0),
                                   ops.CeValue(0, ops.SIGNAL, 0, 1, 1)]], 0, 0, [0])
    assert [p.stale for p in pkts] == ["", ""]
    _, pkts = post_and_send(scn, [[ops.SrcStore(0, 64), ops.Write(0, ops.DATA, 0, 64),
                                   ops.WriteValue(0, ops.SIGNAL, 0, 1)]], 0, 0, [0])
    assert pkts[0].stale == "SRC-unflushed"


def test_the_mixed_planes_tma_stores_are_no_nic_dma_reads():
    scn = _scn(preset="mixed-nvlink-rdma")
    _, pkts = post_and_send(scn, [[ops.SrcStore(0, 64), ops.Write(0, ops.DATA, 0, 64, tma=True),
                                   ops.AtomicAdd(0, ops.SIGNAL, 0, 1)]], 0, 0, [0])
    assert pkts[0].stale == ""
