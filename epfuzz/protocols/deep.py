"""Deep bugs: zoo patterns in the corners where real ones survive testing.

Each bad protocol here is a zoo pattern (same sources) behind a defence that
holds almost always: the receiver checks each slot's trailer (DeepEP keeps
topk_idx in the slot's last 16 bytes) for this epoch's stamp before it trusts a
signal, and the slot has DeepEP's BF16 dispatch size (7168 bf16 hidden values
and 64 metadata bytes: 14,400 bytes, four packets and 113 TLPs at MPS 128). A
stale accept then needs the signal *and* the trailer to become visible before
some middle part of the token -- two reorderings at once -- and, for all but
deep_ro_signal, a code path taken only in a rare corner of the configuration (a
remainder batch whose interval does not divide the token count, a token posted in
several WRs, channels outnumbering QPs, an empty channel): a path the real fix
missed, as fixes often do. Outside its corner a bad form does what its fixed form
does (tests/zoo/test_deep_zoo.py checks the senders of the four corner pairs), so
the corner is one conjunct of the bug, not a magic constant. The
fixed forms close the corner the way the fixes did. Depth is measured, not
assumed: bench/depth.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import opmake, ops
from epfuzz.ir.payload import CHUNK
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Consume, Layout, MemoryView
from epfuzz.protocols.consmake import consume
from epfuzz.protocols.dispatch import FINISH, DispatchProtocol, DispatchReceiver, data_wrs, pack2
from epfuzz.protocols.memread import mem_read, mem_u32x4, mem_u64

#: DeepEP V2 BF16 dispatch slot: 7168 bf16 hidden values, no scales, topk idx + weights
DEEPEP_SLOT = {"payload.hidden_bytes": 14336, "payload.scale_bytes": 0, "payload.meta_bytes": 64}
_VA_SIGNAL = {"signal.kind": "faa", "signal.other_qp": False, "signal.fence": False,
              "signal.encoding": "pack2", "signal.at_end_only": False}


@mypyc_attr(allow_interpreted_subclasses=True)
class GuardedReceiver(DispatchReceiver):
    """DeepEP's forward warp plus a trailer check: a slot the signal covers is read only
    once its last 16 bytes carry this epoch and its token index.

    `width` > 0 reads a scaled-down packed word: the tail in the low `width` bits and
    the finish flag right above it (finish means "all my slots are written").
    """

    def __init__(self, scn: Scenario, lay: Layout, width: int = 0, shared: bool = False, wait_total: bool = False,
                 epoch_base: bool = False, with_cqes: bool = False) -> None:
        super().__init__(scn, lay, epoch_base=epoch_base)
        self.with_cqes = with_cqes  # a tail word and, for some batches, WRITE_WITH_IMM completions
        self.watch = self.watch | {ops.DATA} | ({ops.CQ} if with_cqes else set())
        self.width = width
        self.shared = shared
        self.total = sum(lay.tokens_in_channel) if wait_total else 0
        self.signalled = [0] * lay.num_channels
        self.fin = [False] * lay.num_channels
        self.snap: bytes | None = None

    def watch_bytes(self) -> Mapping[str, Sequence[tuple[int, int]]] | None:
        """The signal words or CQ (whole) and each slot's trailer: what a poll reads. A slot is taken
        once its signal and trailer are seen, so a poll over unchanged bytes takes nothing new."""
        if type(self) is not GuardedReceiver:
            return None
        spc, tb = self.spc, self.tb
        trailers: list[tuple[int, int]] = []
        for c, n in enumerate(self.counts):
            for i in range(n):
                trailers.append(((c * spc + i + 1) * tb - CHUNK, CHUNK))  # lay.slot_offset(c, i) + tb - CHUNK
        return {ops.DATA: trailers}

    def start_epoch(self, epoch: int) -> None:
        super().start_epoch(epoch)
        self.snap = None
        self.signalled = [0] * self.lay.num_channels
        self.fin = [False] * self.lay.num_channels

    def _observe(self, mem: MemoryView, c: int, epoch: int) -> list[tuple[int, int]]:
        if self.shared:  # NVSHMEM #84 shape: one word for all channels, read as "my count landed"
            value = mem_u64(mem, ops.SIGNAL, 0)
            n = self.lay.tokens_in_channel[c]
            if self.total:  # the fix: the word is complete only when every channel's count is in
                return [(1, n)] if value >= self.total else [(0, 0)]
            return [(int(value >= n), min(value, n))]
        if self.with_cqes:
            return super()._observe(mem, c, epoch) + self._cqes(mem, c, epoch)
        if not self.width:
            return super()._observe(mem, c, epoch)
        word = mem_u64(mem, ops.SIGNAL, c * 8)
        finish = (word >> self.width) & 1
        tail = self.lay.tokens_in_channel[c] if finish else word & ((1 << self.width) - 1)
        return [(finish, tail)]

    def _cqes(self, mem: MemoryView, c: int, epoch: int) -> list[tuple[int, int]]:
        """(finish, tail) of this epoch's WRITE_WITH_IMM completions of channel c not seen yet."""
        seen = []
        while (k := self.next_cqe[c]) < self.lay.max_signals:
            valid, lo, _, _ = mem_u32x4(mem, ops.CQ, (c * self.lay.max_signals + k) * 16)
            if valid != epoch + 1:
                break
            seen.append((lo & 1, (lo >> 1) & 0x7FFFFF))
            self.next_cqe[c] = k + 1
        return seen

    def _stamped(self, mem: MemoryView, c: int, slot: int, epoch: int) -> bool:
        # the slot's last 16 bytes: lay.slot_offset(c, slot) + token_bytes - CHUNK; its token: lay.token_of
        w = mem_u32x4(mem, ops.DATA, (c * self.spc + slot + 1) * self.tb - CHUNK)
        return w[0] == epoch and w[2] == slot * self.nch + c

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        out: list[Consume] = []
        nch = self.nch
        # most wake-ups are data landings: re-read the signals only when their words changed
        watched = self.word and not self.with_cqes
        snap = mem_read(mem, ops.SIGNAL, 0, 8 * nch) if watched else None
        changed = snap is None or snap != self.snap
        self.snap = snap
        finished = self.finished
        signalled = self.signalled
        fin = self.fin
        tails = self.tail
        for c in range(nch):
            if finished[c]:
                continue
            n = self.counts[c]
            if changed:
                for finish, tail in self._observe(mem, c, epoch):
                    if tail > n:
                        tail = n
                    if tail > signalled[c]:
                        signalled[c] = tail
                    if finish:
                        fin[c] = True
            old = tails[c]
            t = old
            while t < signalled[c] and self._stamped(mem, c, t, epoch):
                t += 1
            if t > old:
                out.append(consume(ops.DATA, (c * self.spc + old) * self.tb, (t - old) * self.tb,
                                   c, f"slots [{old}, {t}) of channel {c} (signal and trailer seen)"))
                tails[c] = t
            if fin[c] and t == n:
                finished[c] = True
        return out

    def state(self) -> tuple[Any, ...]:
        return (*super().state(), tuple(self.signalled), tuple(self.fin), self.snap)

    def restore(self, state: tuple[Any, ...]) -> None:
        super().restore(state[:3])
        self.signalled, self.fin, self.snap = list(state[3]), list(state[4]), state[5]


@mypyc_attr(allow_interpreted_subclasses=True)
class GuardedDispatch(DispatchProtocol):
    """The dispatch sender with the guarded receiver and one optional corner path.

    `remainder_flag`: the last, partial batch of a channel (more tokens than one
    interval, not a multiple of it) is finished by an RDMA WRITE of pack2(finish, n)
    instead of the fetch-and-add (the pre-458cdcb flag signal, on a rarely taken path).
    `notify_qp`: QP 0 is kept for notifications, data of channel c goes on QP
    1 + c % (Q - 1) and the signal on QP (1 + c) % Q, which is the data QP only while
    Q > C (DeepEP asks for num_sms * 16 + 1 QPs; with fewer, channels share them).
    `width`: the signal packs the tail into `width` bits with finish right above.
    `split_flag`: a channel whose tokens are each posted in several WRs (tokens_per_wr 1,
    splits > 1) raises its tail by an RDMA WRITE of pack2(finish, tail); whole-token WRs
    keep the fetch-and-add (a fix applied to the common path only).
    `epilogue_qp`: the remainder batch (as `remainder_flag`) is signalled after the loop
    by the gpu_barrier path -- a flush, then the signal on the next QP; in-loop batches
    signal on the data QP.
    `remainder_imm`: the remainder batch is completed by a zero-length WRITE_WITH_IMM
    (its CQE in host memory) instead of the fetch-and-add on the GPU-memory tail word.
    `cq_qp`: data WRs go round-robin (QP c % Q); "blocked" posts the completion on the
    QP of the proxy that owns a block of channels (QP c // ceil(C / Q)): the same QP
    while every channel has its own, another QP once channels outnumber QPs; "data"
    posts it on the data QP.
    """

    def __init__(self, name: str, doc: str, fixed: dict[str, Any], expect: str, sources: tuple[str, ...] = (),
                 *, remainder_flag: bool = False, notify_qp: bool = False, signal_on_data_qp: bool = False,
                 width: int = 0, wait_total: bool = False, epoch_base: bool = False, split_flag: bool = False,
                 epilogue_qp: bool = False, remainder_imm: bool = False, cq_qp: str = "", **options: Any) -> None:
        opts = {"width": width, "shared": bool(options.get("shared_word")), "wait_total": wait_total,
                "epoch_base": epoch_base, "with_cqes": remainder_imm}
        # through the class, not super(): mypyc 2.4 passes a `**options` dict to a compiled base's __init__
        # in the wrong parameter (a TypeError at import); this call runs once per protocol, at import
        cast(Any, DispatchProtocol).__init__(self, name, doc, fixed, expect, sources, receiver_cls=GuardedReceiver,
                                             receiver_opts=opts, **options)
        self.remainder_flag = remainder_flag
        self.remainder_imm = remainder_imm
        self.notify_qp = notify_qp
        self.signal_on_data_qp = signal_on_data_qp
        self.width = width
        self.split_flag = split_flag
        self.epilogue_qp = epilogue_qp
        self.cq_qp = cq_qp

    def _qps(self, scn: Scenario, c: int) -> tuple[int, int]:
        nq = scn.topology.num_qps
        if self.cq_qp:
            blocked = c // -(-scn.topology.num_channels // nq)
            return c % nq, (blocked if self.cq_qp == "blocked" else c % nq)
        if not self.notify_qp:
            qp = scn.qp_of_channel(c)
            return qp, ((qp + 1) % nq if scn.signal.other_qp else qp)
        dqp = 1 + c % (nq - 1) if nq > 1 else 0
        return dqp, (dqp if self.signal_on_data_qp else (1 + c) % nq)

    def sender(self, scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        programs: list[list[ops.Op]] = []
        for c in range(lay.num_channels):
            dqp, sqp = self._qps(scn, c)
            n = lay.tokens_in_channel[c]
            interval = n if scn.signal.at_end_only else scn.signal.interval
            prog: list[ops.Op] = []
            signaled = k = 0
            wrs = data_wrs(scn, lay, c)
            for i, (first, cnt, off, length) in enumerate(wrs):
                prog.append(opmake.write(dqp, ops.DATA, off, length))
                done = first + cnt
                last_piece = i + 1 == len(wrs) or wrs[i + 1][0] >= done
                if last_piece and (done - signaled >= interval or done == n):
                    if self.flush_before_signal:
                        prog.append(opmake.flush(dqp))
                    qp = (dqp + 1) % scn.topology.num_qps if self.epilogue_qp and self._remainder(scn, done, n) else sqp
                    prog.append(self._signal(scn, c, qp, signaled, done, n, k, epoch))
                    signaled, k = done, k + 1
            if n == 0:
                prog.append(self._signal(scn, c, sqp, 0, 0, 0, 0, epoch))
            programs.append(prog)
        return programs

    @staticmethod
    def _remainder(scn: Scenario, tail: int, n: int) -> bool:
        """The signal of a channel's last, partial batch (a loop epilogue)."""
        interval = scn.signal.interval
        return not scn.signal.at_end_only and tail == n and n > interval and n % interval > 0

    def _signal(self, scn: Scenario, c: int, qp: int, old: int, tail: int, n: int, k: int, epoch: int) -> ops.Op:
        if self.remainder_flag and self._remainder(scn, tail, n):
            return opmake.write_value(qp, ops.SIGNAL, c * 8, pack2(FINISH, n))
        if self.remainder_imm and self._remainder(scn, tail, n):  # the one CQE of the call: the whole tail
            return opmake.write_imm(qp, ops.DATA, 0, 0, (c << 24) | (n << 1) | FINISH, 0)
        ch = scn.chunking
        if self.split_flag and ch.tokens_per_wr == 1 and ch.splits_per_token > 1:
            return opmake.write_value(qp, ops.SIGNAL, c * 8, pack2(FINISH if tail == n else 0, tail))
        if self.width:
            finish = FINISH if tail == n else 0
            return opmake.atomic_add(qp, ops.SIGNAL, c * 8, (finish << self.width) + tail - old)
        return super()._signal(scn, c, qp, old, tail, n, k, epoch)


# ---------------------------------------------------------------- the deep zoo

#: DeepEP's 4 KiB IB MTU, a PCIe max payload of 128 bytes (the minimum, common on server root ports),
#: a fabric without adaptive routing
_PLATFORM = {"chunking.mtu": 4096, "chunking.max_payload": 128, "knobs.adaptive_routing": False}
_SLOT = {**DEEPEP_SLOT, **_PLATFORM}
_RO_RMW = {**_VA_SIGNAL, **_SLOT, "knobs.mr_relaxed": True, "knobs.atomic_mode": 0}
#: PCI atomic mode 4 on an HCA that enforces IB o9-20: a fetch-and-add is one AtomicOp, held behind its own
#: QP's writes (the #661 counter-argument), so only a signal on another QP can pass the data
_RO_O920 = {**_VA_SIGNAL, **_SLOT, "knobs.mr_relaxed": True, "knobs.atomic_mode": 4, "knobs.hca_o920": True}
_GDR_TARGETS = {ops.DATA: 1, ops.SIGNAL: 1, ops.CQ: 0, ops.RECV: 0}
_P1 = ("DeepEP #661", "DeepEP #674", "nccl#2210")
_P2 = ("DeepEP #40", "DeepEP 458cdcb", "Mooncake #2542")
_P4 = ("nccl#2302", "DeepEP gpu_barrier", "DeepEP #700")
_P9 = ("NVSHMEM #75", "NCCL #2439", "NCCL #2092")


def _pair(name: str, bad_doc: str, fixed_doc: str, pins: dict[str, Any], sources: tuple[str, ...],
          bad: dict[str, Any], fix: dict[str, Any], fixed_pins: dict[str, Any] | None = None
          ) -> tuple[GuardedDispatch, GuardedDispatch]:
    return (GuardedDispatch(name, bad_doc, pins, "finding", sources, **bad),
            GuardedDispatch(f"{name}_fixed", fixed_doc, fixed_pins or pins, "clean", sources, **fix))


_IMM = {**_SLOT, "knobs.mr_relaxed": True, "signal.kind": "write_imm"}
_PAIRS = (
    (1, "RO atomic signal and RO trailer both overtake a middle TLP", _pair(
        "deep_ro_signal", "DeepEP V2 before #674 (RO window, interval 3) with a trailer-checking receiver: a stale "
        "accept needs the trailer's MemWr (A2b) and the fetch-and-add (C2b) both to pass one middle TLP",
        "the window registered strict (#674)", {**_VA_SIGNAL, **_SLOT, "knobs.mr_relaxed": True,
                                                 "signal.interval": 3}, _P1, {}, {},
        {**_VA_SIGNAL, **_SLOT, "knobs.mr_relaxed": False, "signal.interval": 3})),
    (2, "remainder batch finished by an RDMA WRITE flag", _pair(
        "deep_remainder_flag", "RO window, PCI atomic mode 0 (the fetch-and-add is safe); only a channel's last, "
        "partial batch (more than 6 tokens, not a multiple of 6) is finished by an RDMA WRITE of pack2(1, n), "
        "whose RO MemWr may pass the data (A2b)", "every batch finished by the fetch-and-add",
        {**_RO_RMW, "signal.interval": 6}, _P2, {"remainder_flag": True}, {})),
    (2, "flag WRITE left on the split-token path", _pair(
        "deep_flag_write", "RO window, PCI atomic mode 0: the tail is raised by the fetch-and-add (458cdcb), "
        "except on the path that posts each token in several WRs (tokens_per_wr 1, splits > 1), which kept the "
        "RDMA WRITE of pack2(finish, tail): flag and trailer must both pass a middle TLP of a split token",
        "every path raises the tail by the fetch-and-add", dict(_RO_RMW), _P2, {"split_flag": True}, {})),
    (4, "signal on the notify QP when QPs are fewer than channels", _pair(
        "deep_notify_qp", "mode-4 atomics on an o9-20 HCA; QP 0 reserved for notifications; data of channel c "
        "on QP 1 + c % (Q-1), its signal on "
        "QP (1 + c) % Q after a local flush: another QP once Q <= c + 1, unordered with the data (xQP)",
        "the signal on the channel's data QP", dict(_RO_O920), _P4,
        {"notify_qp": True, "flush_before_signal": True},
        {"notify_qp": True, "signal_on_data_qp": True, "flush_before_signal": True})),
    (4, "remainder batch signalled on another QP after a local flush", _pair(
        "deep_other_qp", "o9-20 HCA, RO window: full batches are signalled on the data QP; a channel's last, partial "
        "batch (the signal interval does not divide its token count) is signalled after the loop by the gpu_barrier "
        "path -- a flush (local completion only), then the fetch-and-add on the next QP (xQP)",
        "the epilogue signal on the data QP after the flush", {**_RO_O920, "signal.other_qp": False}, _P4,
        {"flush_before_signal": True, "epilogue_qp": True}, {"flush_before_signal": True})),
    (4, "WRITE_WITH_IMM completion on the block owner's QP", _pair(
        "deep_imm_other_qp", "data WRs round-robin over the QPs (c % Q), the zero-length WRITE_WITH_IMM completion "
        "after a flush on the QP of the proxy owning a block of channels (c // ceil(C / Q)): another QP, unordered "
        "with the data (xQP), only when channels outnumber QPs (DeepEP #700, mori #625: geometry-dependent indexing)",
        "the completion on the data QP (A2a)", {**_IMM, "signal.other_qp": False}, (*_P4, "mori #625"),
        {"flush_before_signal": True, "cq_qp": "blocked"}, {"flush_before_signal": True, "cq_qp": "data"})),
    (9, "remainder batch completed through the host path, data on the GPU path", _pair(
        "deep_gdr", "full batches raise the GPU-memory tail word by the fetch-and-add (mode 0, ordered with the data); "
        "a channel's last, partial batch is completed by a WRITE_WITH_IMM whose CQE lands in host memory and is "
        "trusted with the trailer check, no flush: the CQE (another PCIe path) and the RO trailer (A2b) both pass a "
        "middle TLP", "a flush read before use (NCCL's ncclIbIflush)", dict(_RO_RMW), (*_P9, "NCCL #1688"),
        {"targets": _GDR_TARGETS, "remainder_imm": True},
        {"targets": _GDR_TARGETS, "remainder_imm": True, "flush_on_accept": True})),
    (7, "signal-word reset racing an empty channel's signal", _pair(
        "deep_reset_race", "the receiver zeroes its tail words with a plain store after a call, with no barrier: "
        "only a channel with no tokens signals so early in the next call that the reset can land after it (hang)",
        "the reset ordered before the barrier that releases the next call", dict(_RO_RMW),
        ("UCCL-EP #993", "rocm-systems #11569"), {"reset_signals": False, "prologue_reset": False},
        {"reset_signals": False, "prologue_reset": True})),
)

#: (pattern, title, bad name, fixed name), like zoo.ZOO
DEEP_ZOO: tuple[tuple[int, str, str, str], ...] = tuple((num, title, b.name, f.name) for num, title, (b, f) in _PAIRS)
PROTOCOLS = tuple(p for _, _, pair in _PAIRS for p in pair)
