"""Bug patterns of the 2026 field notes (research/field-2026-12-01.md) as bad/fixed pairs (issue 30.3).

Each pair is written with the ops the emulator has; the bug is in the protocol's logic or in what its
barrier orders, so every transport can show it:

- `signal_baseline` (nccl-tests 081ea64, NCCL #1990; field note N4): the receiver snapshots the shared
  signal counter (`readSignal`) after a barrier whose entry is relaxed, then waits for baseline + k. A
  peer's first increment may be visible before the snapshot (the receiver's barrier store is not ordered
  before the epoch's traffic: "no-barrier"), so the baseline counts it and the wait never ends: a hang.
  Fixed: the entry barrier acquires (the snapshot is ordered before any peer's put).
- `frozen_flag` (vLLM #46913, pypto #1829; N8): a one-shot all-reduce whose flag colour is frozen at CUDA
  graph capture, so every replay writes the same value; the flags are never cleared, so the next replay's
  waiter is satisfied by the previous round's residue and reads that round's slots. Fixed: a colour that
  changes per round (epoch + 1). Both pin an in-order fabric (an intra-node all-reduce; a flag WRITE under
  adaptive routing is zoo pattern 2, a different bug).
- `init_zeroing` (PyTorch #196546, #195761, DistCA #75; N9): each rank zeroes its own signal pad with a
  local memset after the collective allocation, with no barrier before peers may signal: a signal that
  lands first is erased and the receiver hangs. Fixed: a barrier after the memset.
- `flush_before_poll` (NCCL a12d73a8; N10): GPUDirect RDMA, data to GPU memory, the WRITE_WITH_IMM CQE to
  host memory, and the flush read (`flush_on_accept`: a read on the data's PCIe path, which no posted write
  that arrived before it may be passed by, B2a) before the data is used; but on an x86 write-combining
  mapping the flush load can be dispatched before the CQE poll's loads complete, so it is ordered only
  after what had arrived when the receiver last looked (`Protocol.flush_before_poll`). Fixed: an mfence
  between the poll and the flush (the flush follows the completion it is for).
"""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout
from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol, data_wrs
from epfuzz.protocols.gather import BaselineReceiver, GatherReceiver, PathProtocol, Prologue, ReceiverFactory, Sender

# ---------------------------------------------------------------- signal baseline race (N4)


def baseline_sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
    """Per channel (a CTA): its puts, then `ncclGin_SignalInc` on the shared signal index 0, same QP."""
    programs = []
    for c in range(lay.num_channels):
        qp = scn.qp_of_channel(c)
        prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length) for _, _, off, length in data_wrs(scn, lay, c)]
        prog.append(ops.AtomicAdd(qp, ops.SIGNAL, 0, 1))
        programs.append(prog)
    return programs


def barrier_arrival(ordered: bool) -> Prologue:
    """The receiver's barrier arrival before `readSignal`: a store of its own (to a CQ word the protocol
    never reads), ordered before the epoch's traffic (acquire) or racing it (relaxed)."""
    def prologue(scn: Scenario, lay: Layout, epoch: int) -> list[tuple[str, int, int, bool]]:
        return [(ops.CQ, 0, epoch + 1, ordered)]
    return prologue


_BASELINE = {**STRICT_SAME_QP, "signal.encoding": "counter"}
_N4 = ("nccl-tests 081ea64", "NCCL #1990", "rocm-systems #8954")

BASELINE = PathProtocol(
    "signal_baseline", "baseline-relative wait: readSignal(0) after a barrier with a relaxed entry, then "
    "waitSignal(0, base + k); every CTA's put increments the shared index 0, and an increment visible before "
    "the snapshot is counted in the baseline: the wait never ends (hang)",
    dict(_BASELINE), "finding", _N4, baseline_sender, BaselineReceiver, prologue=barrier_arrival(False),
    reset_signals=False)
BASELINE_FIXED = PathProtocol(
    "signal_baseline_fixed", "the entry barrier acquires (081ea64): the snapshot is ordered before every peer's "
    "put", dict(_BASELINE), "clean", _N4[:2], baseline_sender, BaselineReceiver,
    prologue=barrier_arrival(True), reset_signals=False)


# ---------------------------------------------------------------- graph-frozen flag value (N8)


def _flag_sender(per_round: bool) -> Sender:
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        colour = epoch + 1 if per_round else 1
        programs = []
        for c in range(lay.num_channels):
            qp = scn.qp_of_channel(c)
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, off, length)
                                  for _, _, off, length in data_wrs(scn, lay, c)]
            prog.append(ops.WriteValue(qp, ops.SIGNAL, c * 8, colour))
            programs.append(prog)
        return programs
    return sender


def _flag_receiver(per_round: bool) -> ReceiverFactory:
    def make(scn: Scenario, lay: Layout) -> GatherReceiver:
        return GatherReceiver(scn, lay, lambda word, c, epoch: word == (epoch + 1 if per_round else 1),
                              what="every peer's flag shows this round's colour")
    return make


_FLAG = {**STRICT_SAME_QP, "signal.kind": "write", "knobs.adaptive_routing": False}
_N8 = ("vLLM #46913", "pypto #1829")

FROZEN_FLAG = PathProtocol(
    "frozen_flag", "one-shot all-reduce under CUDA graphs: the flag colour was fixed at capture, so every "
    "replay writes and waits for the same value; flags are never cleared, so a replay's waiter is satisfied "
    "by the last round's flags and reads slots not yet written", dict(_FLAG), "finding", _N8,
    _flag_sender(False), _flag_receiver(False), reset_signals=False)
FROZEN_FLAG_FIXED = PathProtocol(
    "frozen_flag_fixed", "the colour changes every round (a device-side counter, not a captured constant)",
    dict(_FLAG), "clean", _N8[:1], _flag_sender(True), _flag_receiver(True), reset_signals=False)


# ---------------------------------------------------------------- init zeroing erases an early signal (N9)


class InitZeroing(DispatchProtocol):
    """The dispatch protocol whose receiver memsets its signal words at the first call, after allocation:
    behind a barrier (`ordered`) or racing the peers' first signals."""

    def __init__(self, name: str, doc: str, sources: tuple[str, ...], expect: str, ordered: bool) -> None:
        super().__init__(name, doc, dict(STRICT_SAME_QP), expect, sources)
        self.ordered = ordered

    def epoch_prologue(self, scn: Scenario, lay: Layout, epoch: int) -> list[tuple[str, int, int, bool]]:
        if epoch:
            return []
        return [(ops.SIGNAL, c * 8, 0, self.ordered) for c in range(lay.num_channels)]


_N9 = ("PyTorch #196546", "PyTorch #195761", "DistCA #75")
INIT_ZEROING = InitZeroing(
    "init_zeroing", "the receiver zeroes its signal pad with a local memset after the collective allocation, no "
    "barrier before the peers' first signals: a signal that lands first is erased (hang)", _N9, "finding", False)
INIT_ZEROING_FIXED = InitZeroing(
    "init_zeroing_fixed", "a barrier after the memset, before any peer may signal", _N9[:1], "clean", True)


# ---------------------------------------------------------------- the flush read issued before the CQE poll (N10)

_GDR = {"knobs.mr_relaxed": False, "signal.kind": "write_imm", "signal.other_qp": False}
_GDR_TARGETS = {ops.DATA: 1, ops.SIGNAL: 1, ops.CQ: 0, ops.RECV: 0}
_N10 = ("NCCL a12d73a8", "NCCL #2048")
FLUSH_BEFORE_POLL = DispatchProtocol(
    "flush_before_poll", "GPUDirect RDMA with the flush read before use, but no mfence between the CQE poll and "
    "the flush load (x86 WC mapping): the flush may be dispatched before the poll's loads complete and then "
    "orders only what had arrived at the previous look", dict(_GDR), "finding", _N10, targets=_GDR_TARGETS,
    flush_on_accept=True, flush_before_poll=True)
FLUSH_BEFORE_POLL_FIXED = DispatchProtocol(
    "flush_before_poll_fixed", "an mfence before the flush load: the flush follows the completion it is for",
    dict(_GDR), "clean", _N10[:1], targets=_GDR_TARGETS, flush_on_accept=True)

PROTOCOLS = (BASELINE, BASELINE_FIXED, FROZEN_FLAG, FROZEN_FLAG_FIXED, INIT_ZEROING, INIT_ZEROING_FIXED,
             FLUSH_BEFORE_POLL, FLUSH_BEFORE_POLL_FIXED)
#: (title, bad, fixed) per pair (tests/zoo/test_breadth_zoo.py, bench/fixed_budget.py)
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("signal baseline read racing the first increment (hang)", BASELINE.name, BASELINE_FIXED.name),
    ("graph-frozen flag value satisfied by the last round", FROZEN_FLAG.name, FROZEN_FLAG_FIXED.name),
    ("init zeroing erases an early signal (hang)", INIT_ZEROING.name, INIT_ZEROING_FIXED.name),
    ("flush read dispatched before the CQE poll completes", FLUSH_BEFORE_POLL.name, FLUSH_BEFORE_POLL_FIXED.name),
)
