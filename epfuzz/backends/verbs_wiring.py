"""The verbs runner's resources: two RDMA devices, and per scenario two MRs, two CQs and QP pairs.

`Devices` opens the sender's and the receiver's device once; `Devices.wire` makes
what one scenario needs and returns it as a `Wiring`, the typed context the
runner passes around instead of long argument lists. Only imported where pyverbs
exists (an RDMA host, or the epfuzz guest).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

from epfuzz.ir import ops
from epfuzz.protocols.base import Layout, Protocol

if TYPE_CHECKING:
    from epfuzz.ir.scenario import Scenario

ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
          | e.IBV_ACCESS_REMOTE_ATOMIC)
RO_FLAG = getattr(e, "IBV_ACCESS_RELAXED_ORDERING", 0)
#: the QPs' local ACK timeout, 4.096 us * 2**18 = 1.07 s. At 14 (67 ms) the injected delays and
#: throttles under TCG outlast it and the requester retransmits; after that rxe (Debian's 6.1
#: kernel) now and then seems never to return the requester's read/atomic credit, and a later
#: fenced WR on the QP (rxe fences on outstanding reads/atomics, IBA 10.8.3.3) waits forever: a
#: fetch-and-add with IBV_SEND_FENCE after a WRITE, every earlier WR completed, stalled in 6 and 1
#: of 40 runs of two mutated scenarios at 14, in 0 of 40 each at 18 (0 without the fence either
#: way; zero-length posts on the QP did not wake it). Nothing is lost on the loopback link, so no
#: run waits for this timeout.
ACK_TIMEOUT = 18
U32X4 = struct.Struct("<4I")


class MrView:
    """The receiver's MR seen through the protocol's MemoryView."""

    def __init__(self, mr: MR, base: dict[str, int]) -> None:
        self.mr = mr
        self.base = base

    def read(self, region: str, offset: int, length: int) -> bytes:
        return self.mr.read(length, self.base[region] + offset)

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self.read(region, offset, 8), "little")

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        # struct, not numpy: the receiver reads CQ entries on every look, and a numpy view of
        # 16 bytes costs several times more under TCG
        a, b, c, d = U32X4.unpack(self.read(region, offset, 16))
        return a, b, c, d


@dataclass
class Wiring:
    """The verbs resources of one scenario run, shared by its repeats and epochs."""

    scn: Scenario
    proto: Protocol
    lay: Layout
    base: dict[str, int]          # region -> offset, the same in both MRs
    staging: int                  # receiver MR: SEND landing slots; sender MR: scratch sources
    recvs: int                    # receives posted per QP per epoch
    rmr: MR
    smr: MR
    cqs: tuple[CQ, CQ]            # the sender's, the receiver's
    pairs: list[tuple[QP, QP]]    # (sender QP, receiver QP) per scenario QP
    mem: MrView

    def qp_index(self, qpn: int) -> int:
        for i, (a, b) in enumerate(self.pairs):
            if qpn in (a.qp_num, b.qp_num):
                return i
        return 0


class Devices:
    """The sender's and the receiver's RDMA device (one name twice for loopback on an HCA port),
    and the verbs resources runs share.

    Creating QPs (three state transitions each, and a GID query) and registering MRs is most of
    a short run's time under TCG, so runs reuse them: a run ends only when every work request
    it posted has completed and every receive it posted was consumed, which leaves a QP pair as
    idle as a new one. MRs grow to the largest run so far; `discard` drops everything after a run
    that failed, whose QPs may be in error."""

    def __init__(self, send_dev: str, recv_dev: str, gid_index: int = 1) -> None:
        self.ctx = (Context(name=send_dev), Context(name=recv_dev))
        self.pd = (PD(self.ctx[0]), PD(self.ctx[1]))
        self.gid_index = gid_index
        #: the sender's netdev, where tc shapes traffic (None: no shaping)
        self.netdev: str | None = "veth0" if send_dev == "rxe_v0" else None
        self._cqs: tuple[CQ, CQ] | None = None
        self._pairs: list[tuple[QP, QP]] = []
        self._mrs: dict[bool, tuple[MR, MR, int]] = {}   # relaxed -> (receiver MR, sender MR, size)

    def discard(self) -> None:
        """Forget the shared resources (pyverbs closes them when they are dropped)."""
        self._cqs, self._pairs, self._mrs = None, [], {}

    def qp_pair(self, cqs: tuple[CQ, CQ]) -> tuple[QP, QP]:
        cap = QPCap(max_send_wr=1024, max_recv_wr=1024, max_send_sge=1, max_recv_sge=1)
        qps = tuple(QP(self.pd[i], QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqs[i], rcq=cqs[i], cap=cap,
                                              sq_sig_all=1)) for i in (0, 1))
        for i in (0, 1):
            j = 1 - i
            attr = QPAttr()
            attr.qp_access_flags = ACCESS
            attr.path_mtu = e.IBV_MTU_1024
            attr.dest_qp_num = qps[j].qp_num
            attr.rq_psn = 0
            attr.sq_psn = 0
            attr.max_dest_rd_atomic = 1
            attr.max_rd_atomic = 1
            attr.min_rnr_timer = 12
            attr.timeout = ACK_TIMEOUT
            attr.retry_cnt = 7
            attr.rnr_retry = 7
            gid = self.ctx[j].query_gid(port_num=1, index=self.gid_index)
            attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=self.gid_index), is_global=1, port_num=1)
            qps[i].to_init(attr)
            qps[i].to_rtr(attr)
            qps[i].to_rts(attr)
        return qps[0], qps[1]

    def _mr_pair(self, nbytes: int, relaxed: bool) -> tuple[MR, MR]:
        have = self._mrs.get(relaxed)
        if have is None or have[2] < nbytes:
            size = max(1 << 16, 1 << (nbytes - 1).bit_length())
            self._mrs[relaxed] = have = (MR(self.pd[1], size, ACCESS | (RO_FLAG if relaxed else 0)),
                                         MR(self.pd[0], size + 4096, ACCESS), size)
        return have[0], have[1]

    def wire(self, scn: Scenario, proto: Protocol) -> Wiring:
        lay = proto.layout(scn)
        base, off = {}, 0
        for name in ops.REGIONS:
            base[name] = off
            off += (lay.sizes[name] + 63) // 64 * 64
        staging = off                       # SEND landing slots (16 B each), one ring per QP
        recvs = lay.max_signals * lay.num_channels
        off += scn.topology.num_qps * recvs * 16
        rmr, smr = self._mr_pair(max(off, 64), scn.knobs.mr_relaxed)
        if self._cqs is None:
            self._cqs = (CQ(self.ctx[0], 1024), CQ(self.ctx[1], 1024))
        while len(self._pairs) < scn.topology.num_qps:
            self._pairs.append(self.qp_pair(self._cqs))
        return Wiring(scn, proto, lay, base, staging, recvs, rmr, smr, self._cqs,
                      self._pairs[:scn.topology.num_qps], MrView(rmr, base))
