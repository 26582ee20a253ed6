"""Issue 30's GPU-side pairs: bugs before the first packet leaves, in the sender's own buffer.

Both pairs need the sender-side source layer (`epfuzz.model.source`: what the NIC's DMA read of the send
buffer sees of the GPU's stores to it); the receiver side is plain: the signal is a fetch-and-add on the
data's own QP into a strict MR, so no PCIe or IB rule lets it pass the data, and what goes wrong is the
bytes the NIC carried.

- `stale_quiet` (mori #404, DeepEP #677 follow-up 5c4f2b8; field note N7): each warp puts its tokens and the
  signal on its QP, then quiets the QP before rewriting (clearing) its send buffer for the next round. The
  quiet drains to a stale frontier (`Flush(stale=True)`: a snapshot of the post index taken before the
  warp's own posts, or an index the posting path no longer advances), so it returns before the NIC has
  read the buffer; the clear lands under packets still to be made and they carry zeros (SRC-overwrite).
  Fixed: the quiet drains to the live post index (`Flush`: the WRs' completions, IB-ack).
- `source_no_flush` (ROCm aorta #205, AINIC-SDC-001; N5): the kernel stores the tokens into the send buffer
  and the proxy posts the puts with no GPU-side flush (NCCL_GDR_FLUSH_DISABLE=1): the NIC's DMA read may
  miss stores still in L2 and send zeros (SRC-unflushed). Fixed: a strict flush after the stores, before
  the post (NCCL_GDR_FLUSH_DISABLE=0 with RCCL_GDR_FLUSH_GPU_MEM_NO_RELAXED_ORDERING=0: a relaxed flush,
  SRC-flush-ro, is no fix).
- `tma_flag` (NCCL 3f29db27; N2), on the `nvlink` preset: token data by TMA bulk stores (the async proxy), the
  flag after a system-scope release, which orders generic-proxy stores only (NV-async-proxy). Fixed: the TMA
  stores waited for and `fence.proxy.async` before the release (`ProxyFence`, NV-proxy-fenced).
- `ro_only_strict_mr` (UCX #11649, #11721; N11), on the `mlx5-ro-only` preset: #674's strict window cannot be
  had on a device with relaxed-only keys (RO-only-key), so the signal's RO AtomicOp passes the data again
  (C2b). Fixed: the signal WQE with the strong-ordering fence flag (WQE-strong-order).
- `mixed_plane` (DeepEP #715; N1), on the `mixed-nvlink-rdma` preset: same-node peers by TMA stores over
  NVLink, the others by RDMA, the signal by RDMA after a device-scope release (MIX-device-scope). Fixed: a
  system-scope fence after the TMA stores completed (MIX-fence-sys).
"""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout
from epfuzz.protocols.dispatch import data_wrs
from epfuzz.protocols.gather import GatherReceiver, PathProtocol, Sender

_STRICT = {"knobs.mr_relaxed": False, "signal.other_qp": False, "signal.kind": "faa", "signal.fence": False}


def _receiver(scn: Scenario, lay: Layout) -> GatherReceiver:
    return GatherReceiver(scn, lay, lambda word, c, epoch: word == 1, what="every warp's signal is 1")


def _span(lay: Layout, c: int) -> tuple[int, int]:
    """The source bytes of channel c's tokens (its slots, as the receiver's image has them)."""
    return lay.slot_offset(c, 0), lay.tokens_in_channel[c] * lay.token_bytes


# ---------------------------------------------------------------- quiet on a stale frontier (N7)


def _quiet_sender(stale: bool) -> Sender:
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        programs = []
        for c in range(lay.num_channels):
            qp = scn.qp_of_channel(c)
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length) for _, _, off, length in data_wrs(scn, lay, c)]
            prog += [ops.AtomicAdd(qp, ops.SIGNAL, c * 8, 1), ops.Flush(qp, stale=stale),
                     ops.SrcClear(*_span(lay, c))]
            programs.append(prog)
        return programs
    return sender


_N7 = ("mori #404", "DeepEP #677 5c4f2b8")
STALE_QUIET = PathProtocol(
    "stale_quiet", "each warp puts its tokens and the signal, quiets its QP, then clears its send buffer for the "
    "next round; the quiet drains to a stale frontier (a post index snapshotted before the warp's own posts), so "
    "the clear can land before the NIC reads the buffer: packets made after it carry zeros",
    dict(_STRICT), "finding", _N7, _quiet_sender(True), _receiver)
STALE_QUIET_FIXED = PathProtocol(
    "stale_quiet_fixed", "the quiet drains to the live post index (mori #404's fix): the clear comes after every "
    "WR of the QP completed, so after the NIC read the buffer", dict(_STRICT), "clean", _N7, _quiet_sender(False),
    _receiver)


# ---------------------------------------------------------------- sender-side visibility (N5)


def _store_sender(flush: bool, relaxed: bool = False) -> Sender:
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        programs = []
        for c in range(lay.num_channels):
            qp = scn.qp_of_channel(c)
            prog: list[ops.Op] = [ops.SrcStore(*_span(lay, c))]
            if flush:
                prog.append(ops.SrcFlush(relaxed))
            prog += [ops.Write(qp, ops.DATA, off, length) for _, _, off, length in data_wrs(scn, lay, c)]
            prog.append(ops.AtomicAdd(qp, ops.SIGNAL, c * 8, 1))
            programs.append(prog)
        return programs
    return sender


_N5 = ("ROCm aorta #205", "AINIC-SDC-001")
SOURCE_NO_FLUSH = PathProtocol(
    "source_no_flush", "the kernel stores the tokens into the send buffer and the proxy posts the puts with no "
    "GPU-side flush (NCCL_GDR_FLUSH_DISABLE=1): the NIC's DMA read may miss stores still in L2 and send zeros",
    dict(_STRICT), "finding", _N5, _store_sender(False), _receiver)
SOURCE_NO_FLUSH_FIXED = PathProtocol(
    "source_no_flush_fixed", "a strict GPU-side flush after the stores, before the post (GDR flush enabled, "
    "without relaxed ordering)", dict(_STRICT), "clean", _N5[:1], _store_sender(True), _receiver)



# ---------------------------------------------------------------- TMA data, a generic-proxy flag (N2)


def _tma_sender(proxy_fence: bool) -> Sender:
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        programs = []
        for c in range(lay.num_channels):
            qp = scn.qp_of_channel(c)
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length, tma=True)
                                  for _, _, off, length in data_wrs(scn, lay, c)]
            if proxy_fence:
                prog.append(ops.ProxyFence())
            prog.append(ops.AtomicAdd(qp, ops.SIGNAL, c * 8, 1))
            programs.append(prog)
        return programs
    return sender


#: a system-scope release before the flag (what `red.release.sys` gives a generic store), to a peer GPU: the
#: signal orders the channel's generic stores, so what is left is the async proxy
_TMA = {**_STRICT, "gpu.fence": "threadfence_system", "gpu.path": "p2p"}
_N2 = ("NCCL 3f29db27",)
TMA_FLAG = PathProtocol(
    "tma_flag", "NCCL-EP hybrid_ep before 3f29db27: token data by TMA bulk stores (cp.async.bulk, the async "
    "proxy) to the peer over NVLink, then the flag with a system-scope release, which orders generic-proxy "
    "stores only: the flag may be visible before the TMA data (nvlink preset; an RDMA preset has no async proxy)",
    dict(_TMA), "finding", _N2, _tma_sender(False), _receiver)
TMA_FLAG.expect = {"nvlink": "finding", "*": "clean"}  # an NVLink bug: under the RDMA presets a TMA store is a WRITE
TMA_FLAG.home_preset = "nvlink"
TMA_FLAG_FIXED = PathProtocol(
    "tma_flag_fixed", "cp.async.bulk.wait_group 0 then fence.proxy.async on the issuing thread before the release "
    "(3f29db27)", dict(_TMA), "clean", _N2, _tma_sender(True), _receiver)
TMA_FLAG_FIXED.home_preset = "nvlink"  # its harness runs where the bad form's bug lives



# ---------------------------------------------------------------- relaxed-only memory keys (UCX #11649)


def _strong_sender(strong: bool) -> Sender:
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        programs = []
        for c in range(lay.num_channels):
            qp = scn.qp_of_channel(c)
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length) for _, _, off, length in data_wrs(scn, lay, c)]
            prog.append(ops.AtomicAdd(qp, ops.SIGNAL, c * 8, 1, strong=strong))
            programs.append(prog)
        return programs
    return sender


_N11 = ("UCX #11649", "UCX #11721", "DeepEP #674")
RO_ONLY = PathProtocol(
    "ro_only_strict_mr", "DeepEP #674's fix (a strict window, the signal a fetch-and-add on the data's QP) on a "
    "device whose memory keys can only be relaxed (mlx5-ro-only): the strict request is registered relaxed "
    "(RO-only-key), and the RO AtomicOp passes the RO data in PCI atomic mode 4 (C2b), the #661 conjunction back",
    dict(_STRICT), "finding", _N11, _strong_sender(False), _receiver)
RO_ONLY.expect = {"mlx5-ro-only": "finding", "*": "clean"}  # a device bug: strict keys elsewhere
RO_ONLY.home_preset = "mlx5-ro-only"
RO_ONLY_FIXED = PathProtocol(
    "ro_only_strict_mr_fixed", "the signal WQE carries the strong-ordering fence flag (UCX #11721's RC fence): "
    "placed without RO whatever the key (WQE-strong-order), the AtomicOp stays behind the data (C2a)",
    dict(_STRICT), "clean", _N11[1:2], _strong_sender(True), _receiver)
RO_ONLY_FIXED.home_preset = "mlx5-ro-only"  # its harness runs where the bad form's bug lives



# ---------------------------------------------------------------- the mixed NVLink + RDMA plane (N1)


def _mixed_sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
    """Channel c's peer is on this node for even c (TMA stores over NVLink), on another node for odd c (RDMA
    puts); the TMA stores complete (`ProxyFence`: tma_store_commit, tma_store_wait), then the signal by RDMA
    on the channel's QP. The scope of the release before it is the scenario's `gpu.fence` (pinned)."""
    programs = []
    for c in range(lay.num_channels):
        qp = scn.qp_of_channel(c)
        prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length, tma=c % 2 == 0)
                              for _, _, off, length in data_wrs(scn, lay, c)]
        prog += [ops.ProxyFence(), ops.AtomicAdd(qp, ops.SIGNAL, c * 8, 1)]
        programs.append(prog)
    return programs


_N1 = ("DeepEP #715",)
MIXED = PathProtocol(
    "mixed_plane", "DeepEP V2 direct mode before #715, scaleup team spanning nodes: same-node peers by TMA stores "
    "over NVLink, others by RDMA puts, the signal by RDMA after a device-scope release, which does not cover "
    "stores landing in another GPU (mixed-nvlink-rdma preset; a hang upstream, a stale accept here)",
    {**_STRICT, "gpu.fence": "threadfence", "gpu.path": "p2p"}, "finding", _N1, _mixed_sender, _receiver)
MIXED.expect = {"mixed-nvlink-rdma": "finding", "nvlink": "finding", "*": "clean"}
MIXED.home_preset = "mixed-nvlink-rdma"
MIXED_FIXED = PathProtocol(
    "mixed_plane_fixed", "fence.acq_rel.sys after the TMA stores completed, before the signal (#715)",
    {**_STRICT, "gpu.fence": "threadfence_system", "gpu.path": "p2p"}, "clean", _N1, _mixed_sender, _receiver)
MIXED_FIXED.home_preset = "mixed-nvlink-rdma"  # its harness runs where the bad form's bug lives

PROTOCOLS = (STALE_QUIET, STALE_QUIET_FIXED, SOURCE_NO_FLUSH, SOURCE_NO_FLUSH_FIXED, TMA_FLAG, TMA_FLAG_FIXED, RO_ONLY,
             RO_ONLY_FIXED, MIXED, MIXED_FIXED)
#: (title, bad, fixed) per pair (tests/zoo/test_gpu_zoo.py, bench/fixed_budget.py)
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("quiet on a stale frontier, then the send buffer cleared", STALE_QUIET.name, STALE_QUIET_FIXED.name),
    ("send buffer posted before the GPU's stores were flushed", SOURCE_NO_FLUSH.name, SOURCE_NO_FLUSH_FIXED.name),
    ("TMA data, a generic-proxy release flag (nvlink)", TMA_FLAG.name, TMA_FLAG_FIXED.name),
    ("a strict MR on a relaxed-only device (mlx5-ro-only)", RO_ONLY.name, RO_ONLY_FIXED.name),
    ("NVLink stores, an RDMA signal after a device-scope release (mixed plane)", MIXED.name, MIXED_FIXED.name),
)
