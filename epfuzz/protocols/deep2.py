"""The second deep set: real bug patterns behind defences other than the slot trailer check.

The first deep set (epfuzz.protocols.deep) guards every slot with one defence, the trailer stamp, and
a search tuned to it (a feature for "a data TLP that ends a slot", a sampler that draws slot ends)
looks better than it is. Each pair here is a write-then-signal bug from the field notes
(/work/shared/research/field-2026-12-01.md, deepep-protocol.md), on DeepEP's BF16 slot and platform
(deep._SLOT), behind one of the defences real receivers use instead:

- a stamp at the slot's START (DeepEP low-latency's src-info header) or in its MIDDLE (the boundary
  of a split token's pieces),
- a header AND a trailer stamp together,
- a NOTIFY word: the count the sender announced for this call, which a stale tail cannot fake,
- a PACKED counter: every channel's count in one word, as lanes,
- a TIMING assumption across QPs: a GPU spin "long enough" for the data before a signal on another QP,
- SEQUENCE WORDS checked on a sample of chunks: the last 16 bytes of every KiB (NCCL LL128's flag per
  line, coarser), or a checksum over the first and last 16 bytes of every MTU packet,
- an epoch-stamped entry in a separate METADATA region as the count, instead of a tail word.

Which of these bugs are deep is measured, not declared: by issue 27's criterion (bench/search.py
DEEP_CRITERION: random finds it in fewer than half of its trials within 10,000 executions), deep2_notify,
deep2_packed and deep2_spin_qp are shallow (bench/search-issue27.json) and are judged with the shallow zoo;
deep2_seq_stride, deep2_meta_qp and deep2_cqe_packets were added to keep six deep bugs in the set.

Each bad form takes its unsafe path only in a corner of the configuration (a remainder batch, a
multi-token WR, a split token on several QPs, a channel whose count overflows its lane, a second
call, channels sharing QPs, a split token's flag WRITE, a remainder batch's epilogue or host-path
CQE) and then needs a schedule that the defence makes rare; outside its corner it posts what its
fixed form posts (tests/zoo/test_deep2_zoo.py checks the senders). The fixed forms close the corner
the way the real fixes did.
"""

from __future__ import annotations

from typing import Any, cast

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import opmake, ops
from epfuzz.ir.payload import CHUNK
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout, MemoryView
from epfuzz.protocols.deep import _GDR_TARGETS, _RO_RMW, GuardedDispatch, GuardedReceiver
from epfuzz.protocols.dispatch import FINISH, data_wrs, pack2, unpack2
from epfuzz.protocols.memread import mem_u32x4, mem_u64

#: where a receiver looks for this call's stamp in a slot, as a chunk index of the slot
CHECKS = ("head", "middle", "both", "trailer", "none", "stride", "packets")
#: "stride": a sequence word in the last 16 bytes of every KiB of a slot (NCCL LL128's flag per line, at a
#: coarser grain), checked there only
STRIDE = 1024
#: "packets": the first and last 16 bytes of every MTU packet of a slot (4 KiB, DeepEP's IB MTU; the
#: slot's last packet ends with it), a checksum over that sample
PACKET = 4096


@mypyc_attr(allow_interpreted_subclasses=True)
class StampReceiver(GuardedReceiver):
    """The guarded forward warp with the stamp somewhere else, or a notify word, or lanes.

    `check`: which chunk(s) of a signalled slot must carry this epoch and token before the slot is
    read ("head": the first 16 bytes, "middle": the chunk at half the slot, "both": first and last).
    `notify`: the sender first writes pack2(epoch + 1, n) into the channel's notify word (recv entry 0
    of the channel, DeepEP's notify_dispatch count); slots are read only up to that count and only
    once it names this call. `lanes`: all channels add into signal word 0, `lanes` bits per channel,
    and a count is rebuilt from its lane modulo 2**lanes (a wrapping counter). `meta`: no tail word:
    the channel's entry in a separate metadata region (the same recv word) carries pack2(epoch + 1,
    tail), and the receiver reads slots up to a tail whose stamp names this call.
    """

    def __init__(self, scn: Scenario, lay: Layout, check: str = "none", notify: bool = False, lanes: int = 0,
                 meta: bool = False, width: int = 0, shared: bool = False, wait_total: bool = False,
                 epoch_base: bool = False, with_cqes: bool = False) -> None:
        # GuardedReceiver's options by name, not `**opts`: mypyc 2.4 passes a `**` dict to a compiled base's
        # __init__ in the wrong parameter
        super().__init__(scn, lay, width=width, shared=shared, wait_total=wait_total, epoch_base=epoch_base,
                         with_cqes=with_cqes)
        if check not in CHECKS:
            raise ValueError(f"check must be one of {CHECKS}")
        self.check = check
        self.notify = notify
        self.lanes = lanes
        self.meta = meta
        if notify or meta:
            self.watch = self.watch | {ops.RECV}
        #: the chunk indices `_stamped` checks, fixed by `check` and the layout: made once, not per slot
        self.checked = self._chunks()

    def _chunks(self) -> tuple[int, ...]:
        last = self.lay.token_bytes // CHUNK - 1
        if self.check == "stride":
            return tuple(range(STRIDE // CHUNK - 1, last + 1, STRIDE // CHUNK))
        if self.check == "packets":
            per = PACKET // CHUNK
            return tuple(sorted({k for s in range(0, last + 1, per) for k in (s, min(s + per - 1, last))}))
        return {"head": (0,), "middle": ((last + 1) // 2,), "both": (0, last), "trailer": (last,),
                "none": ()}[self.check]

    def _stamped(self, mem: MemoryView, c: int, slot: int, epoch: int) -> bool:
        base = (c * self.spc + slot) * self.tb  # lay.slot_offset(c, slot)
        token = slot * self.nch + c  # lay.token_of(c, slot)
        for k in self.checked:
            w = mem_u32x4(mem, ops.DATA, base + k * CHUNK)
            if w[0] != epoch or w[2] != token:
                return False
        return True

    def _observe(self, mem: MemoryView, c: int, epoch: int) -> list[tuple[int, int]]:
        n = self.lay.tokens_in_channel[c]
        if self.meta:  # the metadata entry is the count: trusted only when it names this call
            stamp, tail = unpack2(mem_u64(mem, ops.RECV, c * self.lay.max_signals * 16))
            return [(int(tail >= n), tail)] if stamp == epoch + 1 else [(0, 0)]
        if self.lanes:
            mask = (1 << self.lanes) - 1
            lane = (mem_u64(mem, ops.SIGNAL, 0) >> (self.lanes * c)) & mask
            tail = self.signalled[c] + ((lane - self.signalled[c]) & mask)
            seen = [(int(tail >= n), tail)]
        else:
            seen = super()._observe(mem, c, epoch)
        if not self.notify:
            return seen
        stamp, count = unpack2(mem_u64(mem, ops.RECV, c * self.lay.max_signals * 16))
        if stamp != epoch + 1:  # no count for this call yet: nothing may be read
            return [(0, 0)]
        return [(int(f and t >= count), min(t, count)) for f, t in seen]

    def poll(self, mem: MemoryView, epoch: int) -> list[Any]:
        if self.notify or self.lanes or self.meta:
            self.snap = None  # the words read are not only the tail words: read them at every wake-up
        return super().poll(mem, epoch)


@mypyc_attr(allow_interpreted_subclasses=True)
class Deep2Dispatch(GuardedDispatch):
    """The guarded dispatch sender with this set's corner paths (all off by default).

    `batch_flag`: a WR carrying several tokens (tokens_per_wr > 1) is followed by an RDMA WRITE of
    pack2(finish, tail) instead of the fetch-and-add (the coalesced path kept the pre-458cdcb flag).
    `rail_split`: a token posted in several WRs (tokens_per_wr 1, splits > 1) sends piece i on QP
    (q + i) % Q, NCCL's split of a message over the QPs of a connection; the signal follows the
    first QP. `notify`: pack2(epoch + 1, n) into the channel's notify word on QP 0 before any data.
    `remote_reset`: before the notify the sender zeroes the peer's tail word itself by an RDMA WRITE
    on the data QP; `notify_on_data_qp`: the notify follows it on that QP instead of on QP 0.
    `flush_all`: the flush before a signal covers every QP the token's pieces went on.
    `lanes`: add each batch's count into lane c of the one packed signal word.
    `spin_other_qp`: a channel whose QP is shared (channels outnumber QPs) signals on the next QP
    after a GPU spin of `spin_ns` instead of on its data QP.
    `meta`: each batch is published by an RDMA WRITE of pack2(epoch + 1, tail) into the channel's
    entry of the metadata region (no tail word); `meta_epilogue`: a channel's last, partial batch
    writes its entry after the loop on the next QP (the epilogue's metadata QP), after a flush.
    The base class's options (`split_flag`, `remainder_imm`, ...) go with the signals they change.
    """

    def __init__(self, name: str, doc: str, fixed: dict[str, Any], expect: str, sources: tuple[str, ...] = (), *,
                 check: str = "none", batch_flag: bool = False, rail_split: bool = False, notify: bool = False,
                 lanes: int = 0, spin_other_qp: bool = False, spin_ns: int = 0, remote_reset: bool = False,
                 notify_on_data_qp: bool = False, flush_all: bool = False, meta: bool = False,
                 meta_epilogue: bool = False, **options: Any) -> None:
        # through the class, not super(): mypyc 2.4 passes a `**options` dict to a compiled base's __init__
        # in the wrong parameter (see deep.GuardedDispatch)
        cast(Any, GuardedDispatch).__init__(self, name, doc, fixed, expect, sources, **options)
        self.receiver_opts = {**self.receiver_opts, "check": check, "notify": notify, "lanes": lanes, "meta": meta}
        self.receiver_cls = StampReceiver
        self.batch_flag = batch_flag
        self.rail_split = rail_split
        self.notify = notify
        self.lanes = lanes
        self.spin_other_qp = spin_other_qp
        self.spin_ns = spin_ns
        self.remote_reset = remote_reset
        self.notify_on_data_qp = notify_on_data_qp
        self.flush_all = flush_all
        self.meta = meta
        self.meta_epilogue = meta_epilogue

    @property
    def cuda_refusal(self) -> str:
        """Why the cuda interpreter cannot judge this protocol ("" = it can): its log keeps one class per
        slot body and one for the trailer, so a stamp read inside the body would look unlanded until the
        whole body has landed, hiding exactly the accepts this receiver makes."""
        if self.receiver_opts["check"] in ("head", "middle", "both", "stride", "packets"):
            return (f"its receiver reads a stamp inside the slot body ({self.receiver_opts['check']}), and the "
                    "interpreter's log keeps one class for a slot's whole body")
        return ""

    def shared_qp(self, scn: Scenario, c: int) -> bool:
        """Whether channel c's QP carries another channel too (DeepEP asks num_sms * 16 + 1 QPs)."""
        nq = scn.topology.num_qps
        qp = scn.qp_of_channel(c)
        return nq > 1 and any(scn.qp_of_channel(o) == qp for o in range(scn.topology.num_channels) if o != c)

    def sender(self, scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        nq = scn.topology.num_qps
        ch = scn.chunking
        programs: list[list[ops.Op]] = []
        for c in range(lay.num_channels):
            dqp = scn.qp_of_channel(c)
            sqp = (dqp + 1) % nq if self.spin_other_qp and self.shared_qp(scn, c) else dqp
            n = lay.tokens_in_channel[c]
            interval = n if scn.signal.at_end_only else scn.signal.interval
            prog: list[ops.Op] = []
            if self.remote_reset:
                prog.append(opmake.write_value(dqp, ops.SIGNAL, c * 8, 0))
            if self.notify:
                nqp = dqp if self.notify_on_data_qp else 0
                if self.remote_reset and nqp != dqp:  # "the reset has completed" (locally: pattern 4)
                    prog.append(opmake.flush(dqp))
                prog.append(opmake.write_value(nqp, ops.RECV, c * lay.max_signals * 16, pack2(epoch + 1, n)))
            signaled = k = 0
            wrs = data_wrs(scn, lay, c)
            split = ch.tokens_per_wr == 1 and ch.splits_per_token > 1
            piece = 0
            for i, (first, cnt, off, length) in enumerate(wrs):
                qp = (dqp + piece) % nq if self.rail_split and split else dqp
                prog.append(opmake.write(qp, ops.DATA, off, length))
                done = first + cnt
                last_piece = i + 1 == len(wrs) or wrs[i + 1][0] >= done
                piece = 0 if last_piece else piece + 1
                if last_piece and (done - signaled >= interval or done == n):
                    if self.flush_before_signal:
                        rails = ch.splits_per_token if self.flush_all and self.rail_split and split else 1
                        used = {(dqp + i) % nq for i in range(rails)}
                        prog.extend(opmake.flush(q) for q in sorted(used))
                    if sqp != dqp:
                        prog.append(opmake.spin(self.spin_ns))
                    qp = (dqp + 1) % nq if self.meta_epilogue and self._remainder(scn, done, n) else sqp
                    prog.append(self._signal2(scn, lay, c, qp, signaled, done, n, k, epoch))
                    signaled, k = done, k + 1
            if n == 0:
                prog.append(self._signal2(scn, lay, c, sqp, 0, 0, 0, 0, epoch))
            programs.append(prog)
        return programs

    def _signal2(self, scn: Scenario, lay: Layout, c: int, qp: int, old: int, tail: int, n: int, k: int,
                 epoch: int) -> ops.Op:
        finish = FINISH if tail == n else 0
        if self.meta:
            return opmake.write_value(qp, ops.RECV, c * lay.max_signals * 16, pack2(epoch + 1, tail))
        if self.lanes:
            return opmake.atomic_add(qp, ops.SIGNAL, 0, (tail - old) << (self.lanes * c))
        if self.batch_flag and scn.chunking.tokens_per_wr > 1 and tail - old > 1:
            return opmake.write_value(qp, ops.SIGNAL, c * 8, pack2(finish, tail))
        return self._signal(scn, c, qp, old, tail, n, k, epoch)


# ---------------------------------------------------------------- the second deep set

#: strict MR (the #674 window), PCI atomic mode 0: the fetch-and-add on the data QP is safe, so only the
#: corner path can break the order
_STRICT = {**_RO_RMW, "knobs.mr_relaxed": False}
_FLAG = ("DeepEP #40", "DeepEP 458cdcb", "Mooncake #2542")
_RAIL = ("nccl#2302", "NCCL_IB_SPLIT_DATA_ON_QPS", "DeepEP #700")
_RESET = ("UCCL-EP #993", "rocm-systems #11569", "pytorch #196546")


def _pair2(name: str, bad_doc: str, fixed_doc: str, pins: dict[str, Any], sources: tuple[str, ...],
           bad: dict[str, Any], fix: dict[str, Any]) -> tuple[Deep2Dispatch, Deep2Dispatch]:
    return (Deep2Dispatch(name, bad_doc, pins, "finding", sources, **bad),
            Deep2Dispatch(f"{name}_fixed", fixed_doc, pins, "clean", sources, **fix))


_PAIRS2 = (
    (2, "remainder flag behind a stamp at the slot's start", _pair2(
        "deep2_head_stamp", "DeepEP low-latency's header defence: a signalled slot is read once its FIRST 16 bytes "
        "(the src-info header) carry this call and token; RO window, mode-0 atomics (safe), but a channel's last, "
        "partial batch is finished by an RDMA WRITE of pack2(1, n) whose RO MemWr may pass the batch's later TLPs "
        "(A2b) while the header has landed", "every batch finished by the fetch-and-add (458cdcb)",
        {**_RO_RMW, "signal.interval": 6}, (*_FLAG, "DeepEP LL src-info header"),
        {"check": "head", "remainder_flag": True}, {"check": "head"})),
    (4, "split token over the connection's QPs, stamp in the middle", _pair2(
        "deep2_mid_stamp", "strict MR, mode-0 atomics; a token posted in several WRs (tokens_per_wr 1, splits > 1) "
        "sends piece i on QP (q + i) % Q (NCCL's split of a message over a connection's QPs) and the signal on the "
        "first QP after a flush of that QP only; the receiver reads a slot once the chunk at its MIDDLE (the start "
        "of the second piece) carries this call: a later piece must lag on its own QP (xQP) past the signal and past "
        "the middle chunk", "every piece of a token on the signal's QP", dict(_STRICT), _RAIL,
        {"check": "middle", "rail_split": True, "flush_before_signal": True, "flush_all": True},
        {"check": "middle", "flush_before_signal": True})),
    (2, "multi-token WR flagged by an RDMA WRITE, header and trailer checked", _pair2(
        "deep2_head_trailer", "RO window, mode-0 atomics; the receiver checks a slot's header AND trailer (DeepEP "
        "#437/#491's tag, both ends); a WR that carries several tokens (tokens_per_wr > 1) is followed by an RDMA "
        "WRITE of pack2(finish, tail), the coalesced path 458cdcb did not convert: flag and the last slot's trailer "
        "must both pass one of its middle TLPs (A2b twice)", "the coalesced path raises the tail by the "
        "fetch-and-add", dict(_RO_RMW), (*_FLAG, "DeepEP #437", "DeepEP #491"),
        {"check": "both", "batch_flag": True}, {"check": "both"})),
    (7, "remote tail reset racing a notify word on another QP", _pair2(
        "deep2_notify", "strict MR, mode-0 atomics; each call the sender zeroes the peer's tail word itself (an "
        "RDMA WRITE on the data QP, the clean-before-reuse of rocm-systems #11569 and pytorch #196546), then "
        "announces this call's count pack2(call + 1, n) in a notify word on QP 0 (DeepEP's notify_dispatch); the "
        "receiver trusts its tail word only up to a count that names this call. The notify follows a flush of the "
        "data QP (local completion only): from the second call on, a notify on QP 0 that becomes visible before "
        "the acknowledged reset on the data QP (xQP) makes last call's tail look like this call's",
        "the notify posted after the reset on the same (data) QP", dict(_STRICT), (*_RESET, "DeepEP notify_dispatch"),
        {"notify": True, "remote_reset": True, "reset_signals": False},
        {"notify": True, "remote_reset": True, "notify_on_data_qp": True, "reset_signals": False})),
    (5, "packed per-channel counter lanes overflow into the next channel", _pair2(
        "deep2_packed", "strict MR, mode-0 atomics, one QP (the word is one proxy's): every channel adds its batch "
        "counts into one 64-bit signal word, 4 bits per channel (a wrapping lane: the receiver rebuilds each count "
        "modulo 16, enough for a batch of 6); a channel that sends 16 or more tokens carries into the next "
        "channel's lane, which then counts a token it was never signalled: stale when that channel is behind "
        "(NVSHMEM #84's shared word, aws-ofi-nccl #1229). Deep by its corner alone: inside it the arrival order "
        "already breaks when the next channel still has tokens in flight",
        "8-bit lanes: no channel's count reaches the next lane",
        {**_STRICT, "signal.interval": 6, "topology.num_qps": 1, "chunking.tokens_per_wr": 1},
        ("NVSHMEM #84", "aws-ofi-nccl #1229", "DeepEP pack2"), {"lanes": 4}, {"lanes": 8})),
    (4, "signal on another QP after a spin, when the data QP is shared", _pair2(
        "deep2_spin_qp", "strict MR, mode-0 atomics; a channel whose QP carries other channels too (channels "
        "outnumber QPs) hands its fetch-and-add to the next QP after a 100 us GPU spin, assumed long enough for the "
        "data to land (mori db3a42c9's claim; uccl #374: a later 8 B write overtakes a 1 MB one on another path): "
        "the data QP must lag behind the other QP by more than the spin", "the signal on the data QP",
        dict(_STRICT), ("mori db3a42c9", "uccl #374", "nccl#2302", "DeepEP #715"),
        {"spin_other_qp": True, "spin_ns": 100_000}, {"spin_ns": 100_000})),
    (2, "flag WRITE on the split-token path behind per-KiB sequence words", _pair2(
        "deep2_seq_stride", "RO window, mode-0 atomics; every KiB of a slot ends in a sequence word (this call and "
        "token) and the receiver checks those words only (NCCL LL128's flag per line, at a coarser grain: a sample, "
        "not every line); the tail is raised by the fetch-and-add except on the path that posts each token in "
        "several WRs (tokens_per_wr 1, splits > 1), which kept the RDMA WRITE of pack2(finish, tail): the flag and "
        "every sequence word after an unchecked TLP must pass it (A2b)", "every path raises the tail by the "
        "fetch-and-add", dict(_RO_RMW), (*_FLAG, "NCCL LL128", "shs-ccl-docs #21"),
        {"check": "stride", "split_flag": True}, {"check": "stride"})),
    (4, "epoch-stamped metadata entry written on another QP in the epilogue", _pair2(
        "deep2_meta_qp", "strict MR, mode-0 atomics; no tail word: each batch is published by an RDMA WRITE of "
        "pack2(call + 1, tail) into the channel's entry of a separate metadata region, which the receiver trusts "
        "only when its stamp names this call (last call's entry cannot fake it); full batches write it on the data "
        "QP, ordered behind their data, but a channel's last, partial batch writes it after the loop on the next QP "
        "after a flush (local completion only; DeepEP's gpu_barrier epilogue); the slots also carry a sequence word "
        "at the end of every KiB, checked: the data QP must lag behind that QP (xQP) after its last checked word",
        "the epilogue's entry on the data QP after the flush", dict(_STRICT),
        ("DeepEP notify_dispatch", "DeepEP gpu_barrier", "nccl#2302", "DeepEP #700", "NCCL LL128"),
        {"check": "stride", "meta": True, "meta_epilogue": True, "flush_before_signal": True},
        {"check": "stride", "meta": True, "flush_before_signal": True})),
    (9, "remainder completion through a host-memory CQE, a checksum over each packet's ends", _pair2(
        "deep2_cqe_packets", "RO window, mode-0 atomics; the receiver checks a sample of each slot: the first and "
        "last 16 bytes of every 4 KiB MTU packet (a checksum over a subset); full batches raise the GPU-memory "
        "tail by the fetch-and-add, a channel's last, partial batch is completed by a zero-length WRITE_WITH_IMM "
        "whose CQE lands in host memory (another PCIe path) and is trusted without a flush: the CQE and every "
        "sampled TLP after it must pass an unsampled TLP of the batch (A2b)",
        "a flush read before use (NCCL's ncclIbIflush)", dict(_RO_RMW),
        ("NVSHMEM #75", "NCCL #2439", "NCCL #2092", "NCCL #1688"),
        {"check": "packets", "targets": _GDR_TARGETS, "remainder_imm": True},
        {"check": "packets", "targets": _GDR_TARGETS, "remainder_imm": True, "flush_on_accept": True})),
)

#: (pattern, title, bad name, fixed name), like deep.DEEP_ZOO
DEEP2_ZOO: tuple[tuple[int, str, str, str], ...] = tuple((num, title, b.name, f.name) for num, title, (b, f) in _PAIRS2)
PROTOCOLS = tuple(p for _, _, pair in _PAIRS2 for p in pair)
