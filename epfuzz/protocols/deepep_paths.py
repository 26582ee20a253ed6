"""DeepEP's other paths (issue 30.1): normal-mode combine, V1 low-latency dispatch and combine, V2 direct
mode. Each is a sender written with the ops the emulator has, a receiver from `epfuzz.protocols.gather`, and
a bad and a fixed form (research notes deepep-protocol.md; DeepEP dd758caf, NCCL 5067397c).

- Normal-mode combine (V2 hybrid, csrc/kernels/internode combine): per-token `gin.put`s, `gin.flush`, then a
  VA signal of pack2(1, 0) on the same context; the receiver waits for that exact value in every source's
  word, reduces, and resets the word. The window is the one dispatch registers: before #674 relaxed, so
  the flush (local completion only, IB-local-only) does not stop the signal's RO AtomicOp passing RO data
  under PCI atomic mode 4 (C2b), the #661 conjunction on the reverse path. Fixed: the strict window (#674).
- V1 low-latency dispatch (internode_ll.cu): `nvshmemi_ibgda_put_nbi_warp` per token, then the expert's
  count as -n-1 by `amo_nonfetch_add` on the same QP; the receiver spins until the word is non-zero. Bad:
  the count raised by an RDMA WRITE (the tails before 458cdcb, DeepEP #40): an RO MemWr passes RO data (A2b).
  Fixed: the non-fetching atomic, in PCI atomic mode 0 (its read is an ordering point, B2a).
- V1 low-latency combine: puts, then `amo_nonfetch_add(flag, 1)` per expert, the receiver waits for every
  flag before it reduces. No shipped bug: the pair is the platform hazard of the #661 conjunction on V1 (an
  RO heap with PCI atomic mode 4: C2b), fixed by a heap without RO.
- V2 direct mode (gpu_barrier): per-token puts on each channel's context, a barrier in which every SM
  flushes every context, then SM 0's `ncclGin_SignalInc` on context 0: for data on another context the
  signal is ordered by a local flush only (IB-local-only, xQP; nccl#2302). The sim posts the grid's puts
  from one program: the grid sync puts every put before every flush, which one program order says. Fixed:
  the signal on every context that carried data (NCCL's strong signal orders a context's own puts), the
  receiver waiting for all of them.
"""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout
from epfuzz.protocols.dispatch import data_wrs, pack2
from epfuzz.protocols.gather import MASK64, CountReceiver, GatherReceiver, PathProtocol, ReceiverFactory, Sender

COMBINE_DONE = pack2(1, 0)
_SOURCES_CODE = "DeepEP dd758caf csrc/kernels"


# ---------------------------------------------------------------- normal-mode combine

def combine_sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
    """Per channel (a source's combine channel): its tokens' puts, a flush, then pack2(1, 0) on the same QP."""
    programs = []
    for c in range(lay.num_channels):
        qp = scn.qp_of_channel(c)
        prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length) for _, _, off, length in data_wrs(scn, lay, c)]
        prog += [ops.Flush(qp), ops.AtomicAdd(qp, ops.SIGNAL, c * 8, COMBINE_DONE)]
        programs.append(prog)
    return programs


def combine_receiver(scn: Scenario, lay: Layout) -> GatherReceiver:
    """Every source's word must hold exactly pack2(1, 0) (a second add, or a word not reset, never matches)."""
    return GatherReceiver(scn, lay, lambda word, c, epoch: word == COMBINE_DONE,
                          what="every source's word is pack2(1, 0)")


_COMBINE = {"signal.kind": "faa", "signal.encoding": "pack2", "signal.other_qp": False, "signal.fence": False}

COMBINE = PathProtocol(
    "deepep_combine", "DeepEP V2 normal-mode combine before #674: per-token puts, gin.flush (local completion "
    "only), then the VA signal pack2(1, 0) on the same context into a relaxed-ordering window; the receiver "
    "waits for the exact value from every source, reduces, resets",
    {**_COMBINE, "knobs.mr_relaxed": True}, "finding",
    ("DeepEP #661", "DeepEP #674", "nccl#2210", _SOURCES_CODE), combine_sender, combine_receiver)
COMBINE_FIXED = PathProtocol(
    "deepep_combine_fixed", "the same combine, the window registered NCCL_WIN_STRICT_ORDERING (#674)",
    {**_COMBINE, "knobs.mr_relaxed": False}, "clean", ("DeepEP #674", _SOURCES_CODE),
    combine_sender, combine_receiver)


# ---------------------------------------------------------------- V1 low-latency dispatch

def ll_count(n: int) -> int:
    """The count word DeepEP V1 signals: -n-1 (so that 0 means "not yet", even for n = 0)."""
    return (-n - 1) & MASK64


def _ll_dispatch(atomic: bool) -> Sender:
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        programs = []
        for c in range(lay.num_channels):
            qp = scn.qp_of_channel(c)
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length)
                                  for _, _, off, length in data_wrs(scn, lay, c)]
            value = ll_count(lay.tokens_in_channel[c])
            prog.append(ops.AtomicAdd(qp, ops.SIGNAL, c * 8, value) if atomic
                        else ops.WriteValue(qp, ops.SIGNAL, c * 8, value))
            programs.append(prog)
        return programs
    return sender


_LL = {"signal.other_qp": False, "signal.fence": False, "knobs.mr_relaxed": True}

LL_DISPATCH = PathProtocol(
    "deepep_ll_dispatch", "DeepEP V1 low-latency dispatch with the expert count raised by an RDMA WRITE of "
    "-n-1 (the tails before 458cdcb) into a relaxed-ordering heap: the count's RO MemWr may pass the data (A2b)",
    {**_LL, "signal.kind": "write"}, "finding", ("DeepEP #40", "DeepEP 458cdcb", _SOURCES_CODE),
    _ll_dispatch(False), CountReceiver)
LL_DISPATCH_FIXED = PathProtocol(
    "deepep_ll_dispatch_fixed", "the count by amo_nonfetch_add(-n-1) on the data QP (458cdcb), PCI atomic mode 0: "
    "the read of the read-modify-write cannot pass the data (B2a)",
    {**_LL, "signal.kind": "faa", "knobs.atomic_mode": 0}, "clean", ("DeepEP 458cdcb", _SOURCES_CODE),
    _ll_dispatch(True), CountReceiver)


# ---------------------------------------------------------------- V1 low-latency combine

def ll_combine_sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
    """Per expert: its tokens' combined results by put, then the receive flag by amo_nonfetch_add(1)."""
    programs = []
    for c in range(lay.num_channels):
        qp = scn.qp_of_channel(c)
        prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length) for _, _, off, length in data_wrs(scn, lay, c)]
        prog.append(ops.AtomicAdd(qp, ops.SIGNAL, c * 8, 1))
        programs.append(prog)
    return programs


def ll_combine_receiver(scn: Scenario, lay: Layout) -> GatherReceiver:
    return GatherReceiver(scn, lay, lambda word, c, epoch: word != 0, what="every expert's flag is set")


LL_COMBINE = PathProtocol(
    "deepep_ll_combine", "DeepEP V1 low-latency combine on an RO heap (NVSHMEM_IB_ENABLE_RELAXED_ORDERING) with PCI "
    "atomic mode free: the flag's RO AtomicOp may pass the RO data in mode 4 (C2b), the #661 conjunction on V1",
    {**_LL, "signal.kind": "faa"}, "finding", ("nccl#2210", "DeepEP #661", _SOURCES_CODE),
    ll_combine_sender, ll_combine_receiver)
LL_COMBINE_FIXED = PathProtocol(
    "deepep_ll_combine_fixed", "the same combine with the heap registered without relaxed ordering",
    {**_LL, "signal.kind": "faa", "knobs.mr_relaxed": False}, "clean", ("DeepEP #674", _SOURCES_CODE),
    ll_combine_sender, ll_combine_receiver)


# ---------------------------------------------------------------- V2 direct mode

def direct_qps(scn: Scenario, lay: Layout) -> list[int]:
    """The contexts that carry data: each channel's QP, in increasing order."""
    return sorted({scn.qp_of_channel(c) for c in range(lay.num_channels) if lay.tokens_in_channel[c]})


def _direct(every_context: bool) -> Sender:
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        prog: list[ops.Op] = []
        nc = lay.num_channels
        for t in range(sum(lay.tokens_in_channel)):  # per-token puts, in token order (token t: channel t % C)
            c, slot = t % nc, t // nc
            prog.append(ops.Write(scn.qp_of_channel(c), ops.DATA, lay.slot_offset(c, slot), lay.token_bytes))
        prog += [ops.Flush(q) for q in range(scn.topology.num_qps)]  # the barrier: every SM flushes every QP
        qps = direct_qps(scn, lay) if every_context else [0]
        prog += [ops.AtomicAdd(q, ops.SIGNAL, 0, 1) for q in qps or [0]]
        return [prog] + [[] for _ in range(nc - 1)]
    return sender


def _direct_receiver(every_context: bool) -> ReceiverFactory:
    def make(scn: Scenario, lay: Layout) -> GatherReceiver:
        want = max(1, len(direct_qps(scn, lay))) if every_context else 1
        return GatherReceiver(scn, lay, lambda word, c, epoch: word >= want, words=(0,),
                              what=f"signal word reached {want}")
    return make


_DIRECT = {"signal.kind": "faa", "signal.other_qp": False, "signal.fence": False, "knobs.mr_relaxed": False,
           "chunking.tokens_per_wr": 1, "chunking.splits_per_token": 1}

DIRECT = PathProtocol(
    "deepep_direct", "DeepEP V2 direct mode: per-token puts on each channel's context, gpu_barrier (every SM "
    "flushes every context: local completion only), then one ncclGin_SignalInc on context 0: data on other "
    "contexts is not ordered before it (xQP)",
    dict(_DIRECT), "finding", ("DeepEP gpu_barrier", "nccl#2302", _SOURCES_CODE), _direct(False),
    _direct_receiver(False))
DIRECT_FIXED = PathProtocol(
    "deepep_direct_fixed", "the same, the SignalInc sent on every context that carried data (a strong signal "
    "orders its own context's puts) and the receiver waiting for all of them",
    dict(_DIRECT), "clean", ("NCCL 2.30.5 strong signals", "nccl#2302"), _direct(True), _direct_receiver(True))

PROTOCOLS = (COMBINE, COMBINE_FIXED, LL_DISPATCH, LL_DISPATCH_FIXED, LL_COMBINE, LL_COMBINE_FIXED, DIRECT,
             DIRECT_FIXED)
#: (title, bad, fixed) per pair, the table tests/zoo/test_breadth_zoo.py and bench/fixed_budget.py read
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("DeepEP normal-mode combine: RO window, signal after a local flush", COMBINE.name, COMBINE_FIXED.name),
    ("DeepEP V1 low-latency dispatch: count by RDMA WRITE", LL_DISPATCH.name, LL_DISPATCH_FIXED.name),
    ("DeepEP V1 low-latency combine: RO heap, PCI atomic mode 4", LL_COMBINE.name, LL_COMBINE_FIXED.name),
    ("DeepEP V2 direct mode: signal on context 0 after local flushes", DIRECT.name, DIRECT_FIXED.name),
)
