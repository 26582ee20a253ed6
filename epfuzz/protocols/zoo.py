"""The bug zoo: ten real ordering-bug patterns, each as the bug as shipped and the fix as shipped.

Sources (issues, commits) are each protocol's `sources`, tabled in README's "The bug
zoo". Every pattern is the dispatch sender/receiver with pinned fields and options; the two
that need a different receiver (in-band tag, shared counter) define it here.
`ZOO` lists (number, title, bad, fixed, sources) for the docs, tests and benchmarks.
"""

from __future__ import annotations

from typing import Any

from epfuzz import ops
from epfuzz.payload import CHUNK, token_checksum_ok
from epfuzz.protocols.base import Consume, Layout, MemoryView, Receiver
from epfuzz.protocols.dispatch import DispatchProtocol, DispatchReceiver
from epfuzz.scenario import Scenario


class TagReceiver(Receiver):
    """Polls each slot's last 16 bytes (DeepEP keeps topk_idx there) for this epoch's stamp.

    With `checksum`, it also checks the token's CRC32 before accepting (the fix:
    trust the data, not a tag that may land before the rest of it).
    """

    watch = frozenset({ops.DATA})

    def __init__(self, scn: Scenario, lay: Layout, checksum: bool = False) -> None:
        self.lay = lay
        self.checksum = checksum
        self.accepted = [[False] * n for n in lay.tokens_in_channel]

    def start_epoch(self, epoch: int) -> None:
        self.accepted = [[False] * n for n in self.lay.tokens_in_channel]

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        lay = self.lay
        out = []
        for c, row in enumerate(self.accepted):
            for i, done in enumerate(row):
                if done:
                    continue
                off = lay.slot_offset(c, i)
                tail = off + lay.token_bytes - CHUNK
                w = mem.u32x4(ops.DATA, tail)
                if w[0] != epoch or w[2] != lay.token_of(c, i):
                    continue
                if self.checksum and not token_checksum_ok(mem.read(ops.DATA, off, lay.token_bytes)):
                    continue
                row[i] = True
                out.append(Consume(ops.DATA, off, lay.token_bytes, c, f"slot {i} of channel {c} (tag seen)"))
        return out

    def done(self) -> bool:
        return all(all(r) for r in self.accepted)

    def state(self) -> tuple[Any, ...]:
        return tuple(tuple(r) for r in self.accepted)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.accepted = [list(r) for r in state]


class SharedCounterReceiver(DispatchReceiver):
    """All channels add their token counts to one word.

    Bad (NVSHMEM #84 shape): channel c treats `counter >= k` as "my first k slots
    landed", although other channels' adds count too. Fixed: wait for the total.
    """

    def __init__(self, scn: Scenario, lay: Layout, wait_total: bool = False) -> None:
        super().__init__(scn, lay)
        self.wait_total = wait_total

    def _observe(self, mem: MemoryView, c: int, epoch: int) -> list[tuple[int, int]]:
        value = mem.u64(ops.SIGNAL, 0)
        n = self.lay.tokens_in_channel[c]
        if self.wait_total:
            total = sum(self.lay.tokens_in_channel)
            return [(1, n)] if value >= total else [(0, 0)]
        return [(int(value >= n), min(value, n))]


_STRICT_SAME_QP = {"knobs.mr_relaxed": False, "signal.other_qp": False, "signal.kind": "faa",
                   "signal.encoding": "pack2"}

P2_BAD = DispatchProtocol(
    "flag_write_signal", "the tail is an RDMA WRITE of a flag after the data on an RO MR (DeepEP V1 before "
    "458cdcb): RO lets the flag's MemWr pass the data (A2b); adaptive routing lets its packet pass too",
    {"signal.kind": "write", "knobs.mr_relaxed": True, "signal.other_qp": False}, "finding",
    ("DeepEP #40", "DeepEP 458cdcb", "Mooncake #2542"))
P2_FIX = DispatchProtocol(
    "flag_write_signal_fixed", "the tail raised by an atomic (nvshmemx_signal_op ADD) on a strict MR: "
    "executed in PSN order and not allowed past the data (C2a)",
    dict(_STRICT_SAME_QP), "clean", ("DeepEP 458cdcb",))

P3_BAD = DispatchProtocol(
    "inband_tag", "no signal: the receiver polls the tag at the END of each slot (topk_idx) and trusts the "
    "slot once it shows this epoch; one MTU packet is several MemWr TLPs that RO may reorder",
    {"knobs.mr_relaxed": True}, "finding", ("DeepEP #437", "DeepEP #491"),
    no_signal=True, receiver_cls=TagReceiver)
P3_FIX = DispatchProtocol(
    "inband_tag_fixed", "the same tag, but the slot is accepted only when the whole token's checksum matches",
    {"knobs.mr_relaxed": True}, "clean", ("DeepEP #491",),
    no_signal=True, receiver_cls=TagReceiver, receiver_opts={"checksum": True})

P4_BAD = DispatchProtocol(
    "flush_other_qp", "data on the channel's QP, a flush (local completion only), then the signal on another "
    "QP (DeepEP V2 direct-mode gpu_barrier; nccl#2302): no order across QPs",
    {"knobs.mr_relaxed": False, "signal.kind": "faa", "signal.other_qp": True}, "finding",
    ("nccl#2302", "DeepEP gpu_barrier"), flush_before_signal=True)
P4_FIX = DispatchProtocol(
    "flush_other_qp_fixed", "a strong signal on the same context (QP) as the puts, strict MR (NCCL >= 2.30.5)",
    dict(_STRICT_SAME_QP), "clean", ("NCCL 2.30.5 strong signals",), flush_before_signal=True)

P5_BAD = DispatchProtocol(
    "shared_counter", "every chunk adds to ONE counter and a chunk's consumer treats counter >= its count as "
    "'my data landed' (ADD + >=, weak signals)",
    {**_STRICT_SAME_QP, "signal.encoding": "counter"}, "finding", ("NVSHMEM #84", "aws-ofi-nccl #1229"),
    shared_word=True, receiver_cls=SharedCounterReceiver)
P5_FIX = DispatchProtocol(
    "shared_counter_fixed", "one counter, but consumers wait for the total of all chunks",
    {**_STRICT_SAME_QP, "signal.encoding": "counter"}, "clean", ("NVSHMEM #84",),
    shared_word=True, receiver_cls=SharedCounterReceiver, receiver_opts={"wait_total": True})

P6_BAD = DispatchProtocol(
    "stale_epoch_counter", "tail counters are never reset and the receiver compares them with this epoch's "
    "count: from the second call on, last call's value says 'ready' (identical payloads hide it)",
    dict(_STRICT_SAME_QP), "finding", ("UCCL-EP #903",), reset_signals=False)
P6_FIX = DispatchProtocol(
    "stale_epoch_counter_fixed", "monotonic counters: the receiver subtracts what earlier epochs added",
    dict(_STRICT_SAME_QP), "clean", ("UCCL-EP #903",), reset_signals=False, receiver_opts={"epoch_base": True})

P7_BAD = DispatchProtocol(
    "signal_reset_race", "the receiver resets its tail words with a plain store after a call, with no barrier "
    "before the sender's next signals: the reset can land after them and erase them (hang)",
    dict(_STRICT_SAME_QP), "finding", ("UCCL-EP #993", "rocm-systems #11569"),
    reset_signals=False, prologue_reset=False)
P7_FIX = DispatchProtocol(
    "signal_reset_race_fixed", "the reset is ordered before the barrier that releases the next call",
    dict(_STRICT_SAME_QP), "clean", ("UCCL-EP #993",), reset_signals=False, prologue_reset=True)

P8_BAD = DispatchProtocol(
    "early_credit_release", "the receiver returns a slot's credit when it accepts it, while it is still reading "
    "it (staging released before consumed): the next call's writes land on bytes being read",
    dict(_STRICT_SAME_QP), "finding", ("DeepEP #621", "DeepEP #642", "nccl-extensions #8"),
    release_at_accept=True, poison=False)
P8_FIX = DispatchProtocol(
    "early_credit_release_fixed", "the credit is returned only after the read (the fence before reuse)",
    dict(_STRICT_SAME_QP), "clean", ("DeepEP #642",), release_at_accept=False, poison=False)

_GDR_TARGETS = {ops.DATA: 1, ops.SIGNAL: 1, ops.CQ: 0, ops.RECV: 0}
P9_BAD = DispatchProtocol(
    "gdr_no_flush", "GPUDirect RDMA: data goes to GPU memory, the completion to host memory; the consumer "
    "trusts the CQE without a flush, though the two paths are not ordered",
    {"knobs.mr_relaxed": False, "signal.kind": "write_imm", "signal.other_qp": False}, "finding",
    ("NVSHMEM #75", "NCCL #2439", "NCCL #2092"), targets=_GDR_TARGETS)
P9_FIX = DispatchProtocol(
    "gdr_no_flush_fixed", "after the CQE, a flush (a read on the GPU path) before the data is consumed",
    {"knobs.mr_relaxed": False, "signal.kind": "write_imm", "signal.other_qp": False}, "clean",
    ("NVSHMEM #75",), targets=_GDR_TARGETS, flush_on_accept=True)

P10_BAD = DispatchProtocol(
    "geometry_index", "the sender computes a token's slot with a power-of-two stride the receiver does not use: "
    "right for 1, 2, 4 or 8 channels, wrong for the others",
    {**_STRICT_SAME_QP, "chunking.tokens_per_wr": 1}, "finding", ("mori #625", "DeepEP #700"),
    wrong_stride=True)
P10_FIX = DispatchProtocol(
    "geometry_index_fixed", "sender and receiver share one slot function",
    {**_STRICT_SAME_QP, "chunking.tokens_per_wr": 1}, "clean", ("mori #625",))

#: (pattern number, title, bad protocol name, fixed protocol name)
ZOO: tuple[tuple[int, str, str, str], ...] = (
    (1, "RO atomic signal overtakes RO data", "deepep_v2_dispatch", "deepep_v2_dispatch_fixed"),
    (2, "flag written with RDMA WRITE after the data", "flag_write_signal", "flag_write_signal_fixed"),
    (3, "in-band tag at the end of the payload instead of a signal", "inband_tag", "inband_tag_fixed"),
    (4, "signal on another QP after only a local flush", "flush_other_qp", "flush_other_qp_fixed"),
    (5, "one cumulative counter shared by in-flight chunks", "shared_counter", "shared_counter_fixed"),
    (6, "stale-epoch slot reuse", "stale_epoch_counter", "stale_epoch_counter_fixed"),
    (7, "signal-word reset racing the next epoch's signal", "signal_reset_race", "signal_reset_race_fixed"),
    (8, "receiver staging reused before it is consumed", "early_credit_release", "early_credit_release_fixed"),
    (9, "completion seen before the data is visible, no flush", "gdr_no_flush", "gdr_no_flush_fixed"),
    (10, "geometry-dependent indexing", "geometry_index", "geometry_index_fixed"),
)

PROTOCOLS = (P2_BAD, P2_FIX, P3_BAD, P3_FIX, P4_BAD, P4_FIX, P5_BAD, P5_FIX, P6_BAD, P6_FIX, P7_BAD, P7_FIX,
             P8_BAD, P8_FIX, P9_BAD, P9_FIX, P10_BAD, P10_FIX)
