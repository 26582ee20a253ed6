"""RDMA READ used as a flush (issue 30, points 1-2: the READ layer, `epfuzz.model.rdma_read`).

A READ is served by the responder NIC with a MemRd, which must not pass the posted writes its QP
put into memory before it (PCIe B2a, RO or not): once the READ has completed, every earlier WRITE of
that QP is visible. NCCL's GPUDirect flush is such a READ (net_ib `ncclIbIflush` posts an RDMA READ
on its flush QP), and a pull protocol (DeepEP V2's GIN signal "notifies the peers to read tokens
from the receive buffer") lives on the same READ ordering. Two ways to get it wrong, each a pair:

- `read_flush_unfenced`: data WRITEs (relaxed-ordering window), a READ of the channel's last slot on
  the data QP as the flush, then the tail flag as an RDMA WRITE without the fence indicator: IB lets
  a later WRITE of the QP take effect before the READ has read memory (`IB-read-unfenced`, PCIe A3),
  and the RO flag then passes the RO data (A2b): the READ flushed nothing the flag waited for.
  Fixed: the flag carries IBV_SEND_FENCE, so it starts once the READ's response is back
  (`IB-fence-read`), behind a MemRd that no earlier data write was passed by (B2a).
- `read_flush_other_qp`: the READ is posted on a flush QP of its own (the next QP) and the sender
  waits for its completion before the flag: a READ on another QP is not ordered with the data QP's
  writes (xQP), so it may read before they land and its completion proves nothing about them. Fixed:
  the READ on the data QP (its completion, waited for by a Flush, covers that QP's writes: B2a).

The receiver waits for every channel's flag (this epoch's colour) and reads every slot at once.
"""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout
from epfuzz.protocols.dispatch import data_wrs
from epfuzz.protocols.gather import GatherReceiver, PathProtocol, ReceiverFactory, Sender

#: an RO window (the flag passes data unless something orders it), the flag an RDMA WRITE
_PULL = {"knobs.mr_relaxed": True, "knobs.nic_relaxed_ordering": True, "signal.kind": "write",
         "signal.other_qp": False, "signal.fence": False}
_SOURCES = ("IBA vol. 1 ch. 9 (RDMA READ ordering) and IBV_SEND_FENCE", "PCIe r5.0 Table 2-40 A3, B2a",
            "NCCL net_ib ncclIbIflush (the GDR flush is an RDMA READ)", "issue 30: DeepEP V2 GIN pull notify")


def _last8(lay: Layout, c: int) -> int:
    """The offset of the last 8 bytes of channel c's last slot: what the flush READ reads."""
    return lay.slot_offset(c, lay.tokens_in_channel[c] - 1) + lay.token_bytes - 8


def _flush_sender(read_qp: str, wait: str) -> Sender:
    """Data WRITEs, the flush READ on the data QP (`read_qp` "data") or the next QP ("next"), then the flag;
    the flag waits for the READ by a fence (`wait` "fence"), a Flush of the READ's QP ("flush") or not at all."""
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        nq = scn.topology.num_qps
        programs = []
        for c in range(lay.num_channels):
            qp = scn.qp_of_channel(c)
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length) for _, _, off, length in data_wrs(scn, lay, c)]
            if lay.tokens_in_channel[c]:
                rq = (qp + 1) % nq if read_qp == "next" else qp
                prog.append(ops.Read(rq, ops.DATA, _last8(lay, c), 8))
                if wait == "flush":
                    prog.append(ops.Flush(rq))
            prog.append(ops.WriteValue(qp, ops.SIGNAL, c * 8, epoch + 1, fence=wait == "fence"))
            programs.append(prog)
        return programs
    return sender


def _flag_receiver() -> ReceiverFactory:
    def make(scn: Scenario, lay: Layout) -> GatherReceiver:
        return GatherReceiver(scn, lay, lambda word, c, epoch: word == epoch + 1,
                              what="every channel's flag shows this epoch")
    return make


READ_UNFENCED = PathProtocol(
    "read_flush_unfenced", "data WRITEs, a flush READ of the last slot on the data QP, then the tail flag "
    "WRITE without IBV_SEND_FENCE: the flag may take effect before the READ has read memory (IB-read-unfenced) "
    "and pass the RO data (A2b)", dict(_PULL), "finding", _SOURCES, _flush_sender("data", "none"), _flag_receiver())
READ_UNFENCED_FIXED = PathProtocol(
    "read_flush_unfenced_fixed", "the flag WRITE carries IBV_SEND_FENCE: it starts once the READ's response is "
    "back (IB-fence-read), and the READ's MemRd passed no earlier data write (B2a)", dict(_PULL), "clean",
    _SOURCES, _flush_sender("data", "fence"), _flag_receiver())
READ_OTHER_QP = PathProtocol(
    "read_flush_other_qp", "the flush READ is posted on a QP of its own (the next one) and waited for: a READ "
    "on another QP is not ordered with the data QP's writes (xQP), so its completion proves nothing about them",
    dict(_PULL), "finding", _SOURCES, _flush_sender("next", "flush"), _flag_receiver())
READ_OTHER_QP_FIXED = PathProtocol(
    "read_flush_other_qp_fixed", "the flush READ on the data QP, waited for by a Flush: its MemRd passed none "
    "of that QP's earlier writes (B2a), so its completion covers them", dict(_PULL), "clean", _SOURCES,
    _flush_sender("data", "flush"), _flag_receiver())

def _litmus_sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
    """The safety table's READ axis (`epfuzz.triage.safety`): the READ on the data QP with the flag fenced
    (`signal.fence`) or not, or on the other QP waited for by a Flush (`signal.other_qp`)."""
    other = scn.signal.other_qp and scn.topology.num_qps > 1
    wait = "flush" if other else "fence" if scn.signal.fence else "none"
    return _flush_sender("next" if other else "data", wait)(scn, lay, epoch)


#: not registered: the safety table runs it on dispatch_any's scenarios (its fields are all this reads)
READ_FLUSH_LITMUS = PathProtocol(
    "read_flush_litmus", "data WRITEs, a flush READ, then the flag: the safety table's READ axis", {}, "clean",
    _SOURCES, _litmus_sender, _flag_receiver())

PROTOCOLS = (READ_UNFENCED, READ_UNFENCED_FIXED, READ_OTHER_QP, READ_OTHER_QP_FIXED)
#: (title, bad, fixed) per pair (tests/zoo/test_pull_zoo.py, bench/fixed_budget.py)
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("flag WRITE after a flush READ without the fence", READ_UNFENCED.name, READ_UNFENCED_FIXED.name),
    ("flush READ on another QP than the data", READ_OTHER_QP.name, READ_OTHER_QP_FIXED.name),
)
