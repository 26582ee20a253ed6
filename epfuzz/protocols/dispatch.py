"""The write-then-signal dispatch family, parameterised by the scenario's `signal`.

DeepEP V2 hybrid dispatch (csrc/kernels/internode*.cu, research notes): each
channel (one warp) RDMA-WRITEs token slots into the peer's receive buffer
`[channel][slot]`, and every `update_interval` tokens raises the channel's tail
word; the receiver's forward warp polls the tail with ld_acquire_sys and reads
slots [old_tail, tail) whole. The variants in this package are this one sender
and receiver with different fields pinned, not copies of each other.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import opmake, ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Consume, Layout, MemoryView, Pattern, Protocol, Receiver
from epfuzz.protocols.consmake import consume
from epfuzz.protocols.dispatchops import FINISH, pack2, signal_op, signal_rec, stride_shift, wrs_of
from epfuzz.protocols.memread import buf_u64, cq_seen, mem_read, mem_u32x4, mem_u64, num_str, tail_words  # noqa: F401

# mem_read, mem_u32x4 are not used here: the memory readers lived here until issue 31 moved them to `memread`,
# and plug-ins import them from here

# Final: compiled code reads them as constants, not a module-dict lookup per word (issue 31)
_U32X4: Final = struct.Struct("<4I")  # a CQE or a 16-byte chunk, as `MemoryView.u32x4` reads it
_DATA: Final = ops.DATA  # the region names too (`ops` is plain Python: a module attribute get per use)
_SIGNAL: Final = ops.SIGNAL
_CQ: Final = ops.CQ
_RECV: Final = ops.RECV
_WATCH_SIGNAL: Final = frozenset({ops.SIGNAL})
_WATCH_CQ: Final = frozenset({ops.CQ})
_MASK64: Final = (1 << 64) - 1


#: the strict same-QP fetch-and-add signal (DeepEP's pack2): the baseline most bug-zoo protocols pin
STRICT_SAME_QP = {"knobs.mr_relaxed": False, "signal.other_qp": False, "signal.kind": "faa",
                  "signal.encoding": "pack2"}


def unpack2(word: int) -> tuple[int, int]:
    return word & 0xFFFFFFFF, word >> 32


def data_wrs(scn: Scenario, lay: Layout, channel: int) -> list[tuple[int, int, int, int]]:
    """(first_slot, n_slots, byte_offset, byte_len) per data WR, in post order."""
    ch = scn.chunking
    return wrs_of(lay.tokens_in_channel[channel], ch.tokens_per_wr, ch.splits_per_token, lay.token_bytes,
                  channel * lay.slots_per_channel)


@mypyc_attr(allow_interpreted_subclasses=True)
class DispatchProtocol(Protocol):
    """One sender and receiver; the variants differ by pinned fields and a few options.

    Options (all default off): `flush_before_signal` (Flush the data QP before each
    signal, as DeepEP's direct-mode gpu_barrier), `shared_word` (every channel adds
    to signal word 0), `no_signal` (no signal at all: the receiver watches the
    payload), `wrong_stride` (the sender computes slot = token // next_pow2(C)),
    plus the `Protocol` attributes (reset_signals, poison, release_at_accept,
    flush_on_accept, targets) and `receiver_cls`/`receiver_opts`.
    """

    #: the last sender call's scenario, layout, epoch and records, where a later epoch of it will ask (exact, no SEND
    #: signal): they serve every epoch (frozen; the options are set once), which the build repeats (`repost`)
    _memo_scn: object = None
    _memo_lay: object = None
    _memo_epoch: int = -1
    _memo: tuple[tuple[opmake.OpRec, ...], ...] = ()  # a constant default: mypyc warned of a list's

    def __init__(self, name: str, doc: str, fixed: dict[str, Any], expect: str,
                 sources: tuple[str, ...] = (), *, receiver_cls: type[Receiver] | None = None,
                 receiver_opts: dict[str, Any] | None = None, prologue_reset: bool | None = None,
                 pattern: Pattern | None = None, **options: Any) -> None:
        self.name = name
        self.doc = doc
        self.fixed = fixed
        self.expect = expect  # type: ignore[assignment]
        self.sources = sources
        self.pattern = pattern
        #: what makes the receiver: a Receiver class taking (scn, layout, **receiver_opts)
        self.receiver_cls: Callable[..., Receiver] = receiver_cls or DispatchReceiver
        self.receiver_opts = receiver_opts or {}
        self.prologue_reset = prologue_reset
        self.flush_before_signal = bool(options.pop("flush_before_signal", False))
        self.shared_word = bool(options.pop("shared_word", False))
        self.no_signal = bool(options.pop("no_signal", False))
        self.wrong_stride = bool(options.pop("wrong_stride", False))
        self._take_options(options, ("reset_signals", "poison", "release_at_accept", "flush_on_accept",
                                     "flush_before_poll", "targets", "rx_map"), "DispatchProtocol")

    def epoch_prologue(self, scn: Scenario, lay: Layout, epoch: int) -> list[tuple[str, int, int, bool]]:
        """With `prologue_reset`, the receiver zeroes its tail words itself between epochs."""
        if self.prologue_reset is None or epoch == 0:
            return []
        return [(ops.SIGNAL, c * 8, 0, self.prologue_reset) for c in range(lay.num_channels)]

    def _shift(self, lay: Layout, c: int, first: int, cnt: int) -> tuple[int, int]:
        """(destination offset, source shift) of a WR writing slots [first, first+cnt) of channel c.

        `Layout.slot_offset` and `Layout.token_of` written out (a call from compiled code into the
        plain-Python Layout cost more than the WR it computes, issue 31); tests/zoo/test_sender_ops.py
        checks them against the Layout's methods."""
        spc = lay.slots_per_channel
        tb = lay.token_bytes
        if not self.wrong_stride:
            return (c * spc + first) * tb, 0  # lay.slot_offset(c, first)
        return stride_shift(c, first, spc, tb, lay.num_channels)

    def sender(self, scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        return [[r.op() for r in p] for p in self.sender_recs(scn, lay, epoch)]

    def sender_recs(self, scn: Scenario, lay: Layout, epoch: int) -> list[list[opmake.OpRec]]:
        """`sender`'s ops as records (`OpRec`, their fields native): what the sim's build posts for an exact one."""
        # what every channel reads, read once (an attribute of the plain-Python scenario or layout is a generic
        # lookup from compiled code); `OpRec.op` makes the very ops (tests/zoo/test_sender_ops.py, test_opmake.py)
        sig = scn.signal
        nq, cq = scn.topology.num_qps, scn.topology.channel_qp  # cq: `Scenario.qp_of_channel` written out below
        ch = scn.chunking
        per_wr, splits = ch.tokens_per_wr, ch.splits_per_token
        other_qp = sig.other_qp
        at_end_only = sig.at_end_only
        interval = sig.interval
        # `_signal`'s reads, once: an exact DispatchProtocol's signals are `signal_op`'s (a subclass's through
        # its own `_signal`, which may be overridden)
        own = type(self) is DispatchProtocol
        kind, pack, fence = sig.kind, sig.encoding == "pack2", sig.fence
        # an epoch's ops are the previous epoch's (only a SEND's value holds the epoch): copies of its lists
        if own and epoch > 0 and kind != "send" and self._memo_epoch == epoch - 1 and self._memo_scn is scn \
                and self._memo_lay is lay:
            self._memo_epoch = epoch
            return [list(p) for p in self._memo]
        counts = lay.tokens_in_channel
        spc = lay.slots_per_channel
        tb = lay.token_bytes
        row_bytes = spc * tb  # lay.slot_offset(c, first) == c * row_bytes + ...
        nch = lay.num_channels
        wrong_stride = self.wrong_stride
        no_signal = self.no_signal
        flush = self.flush_before_signal
        shared = self.shared_word
        data = ops.DATA
        programs: list[list[opmake.OpRec]] = []
        for c in range(nch):
            qp = cq[c] if c < len(cq) else c % nq
            sqp = (qp + 1) % nq if other_qp else qp
            n = counts[c]
            every = n if at_end_only else interval
            word = 0 if shared else c * 8
            prog: list[opmake.OpRec] = []
            signaled = 0
            k = 0
            wrs = wrs_of(n, per_wr, splits, tb, c * spc)  # data_wrs(scn, lay, c)
            last = len(wrs) - 1
            for i, (first, cnt, off, length) in enumerate(wrs):
                if wrong_stride:  # `_shift` from the numbers read above (an override of it is called)
                    dst, shift = stride_shift(c, first, spc, tb, nch) if own else self._shift(lay, c, first, cnt)
                    prog.append(opmake.rec_write(qp, data, dst + off - c * row_bytes - first * tb, length, shift=shift))
                else:  # _shift gives (slot_offset, 0): the WR's own offset
                    prog.append(opmake.rec_write(qp, data, off, length))
                if no_signal:
                    continue
                done = first + cnt
                if (i == last or wrs[i + 1][0] >= done) and (done - signaled >= every or done == n):
                    if flush:
                        prog.append(opmake.rec_flush(qp))
                    prog.append(signal_rec(kind, pack, fence, word, c, sqp, signaled, done, n, k, epoch) if own
                                else opmake.wrap(self._signal(scn, c, sqp, signaled, done, n, k, epoch)))
                    signaled = done
                    k += 1
            if n == 0 and not no_signal:  # an empty channel still tells the receiver it is finished
                prog.append(signal_rec(kind, pack, fence, word, c, sqp, 0, 0, 0, 0, epoch) if own
                            else opmake.wrap(self._signal(scn, c, sqp, 0, 0, 0, 0, epoch)))
            programs.append(prog)
        if own and kind != "send" and epoch + 1 < scn.payload.epochs:
            self._memo_scn, self._memo_lay, self._memo_epoch = scn, lay, epoch
            self._memo = tuple(tuple(p) for p in programs)
        return programs

    def _signal(self, scn: Scenario, c: int, qp: int, old: int, tail: int, n: int, k: int, epoch: int) -> ops.Op:
        sig = scn.signal
        return signal_op(sig.kind, sig.encoding == "pack2", sig.fence, 0 if self.shared_word else c * 8, c, qp, old,
                         tail, n, k, epoch)

    def receiver(self, scn: Scenario, lay: Layout) -> Receiver:
        if self.receiver_cls is DispatchReceiver and not self.receiver_opts:  # a native call, no ** (issue 31)
            return DispatchReceiver(scn, lay)
        return self.receiver_cls(scn, lay, **self.receiver_opts)


@mypyc_attr(allow_interpreted_subclasses=True)
class DispatchReceiver(Receiver):
    """DeepEP's forward warp: poll the channel's tail, consume [old_tail, tail)."""

    def __init__(self, scn: Scenario, lay: Layout, epoch_base: bool = False) -> None:
        self.lay = lay
        self.epoch_base, self.epoch = epoch_base, 0  # counters persist across epochs: subtract earlier epochs'
        sig = scn.signal  # a plain-Python dataclass: each attribute read is a generic get
        self.kind, self.pack = sig.kind, sig.encoding == "pack2"
        #: the tail is a word in signal memory (not a completion): decided once, read at every poll
        self.word = self.kind in ("faa", "write")
        self.watch = _WATCH_SIGNAL if self.word else _WATCH_CQ
        n = lay.num_channels
        # the layout's numbers, copied once: a poll reads them per channel and per slot
        self.nch = n
        self.spc = lay.slots_per_channel
        self.tb = lay.token_bytes
        self.counts = lay.tokens_in_channel
        self.ms = lay.max_signals
        self._unpack_tails: Callable[[bytearray], tuple[int, ...]] = tail_words(n).unpack  # a bound method: no look-up
        self.tail = [0] * n
        self.finished = [False] * n
        self.next_cqe = [0] * n
        #: during a `poll` only, the view polled and its signal bytes: `_observe` reads them without a lookup
        self._view: MemoryView | None = None
        self._words: bytearray | None = None

    def watch_bytes(self) -> Mapping[str, Sequence[tuple[int, int]]] | None:
        """The watched regions whole: a poll reads the tail words (or CQ entries, and the messages they complete)
        and consumes everything they announce, so a second poll over unchanged words finds nothing. Only this
        class and the built-in subclasses that say so promise it: a subclass may read more (it opts in)."""
        return {} if type(self) is DispatchReceiver else None

    def start_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        n = self.lay.num_channels
        self.tail = [0] * n
        self.finished = [False] * n
        self.next_cqe = [0] * n

    def _observe(self, mem: MemoryView, c: int, epoch: int) -> list[tuple[int, int]]:
        """New (finish, tail) observations for channel c since the last poll."""
        if self.word:
            words = self._words
            if words is not None and mem is self._view:  # in this class's poll, over the view it polls
                return [self._word(buf_u64(words, c * 8), self.counts[c])]
            return [self._word(mem_u64(mem, _SIGNAL, c * 8), self.counts[c])]
        seen = []
        ms = self.ms
        # the CQ's bytes looked up once for the channel's entries, not per entry (`mem_u32x4`'s read)
        bufs: dict[str, bytearray] | None = getattr(mem, "bufs", None)
        cq = bufs[_CQ] if bufs is not None else None
        while self.next_cqe[c] < ms:
            k = self.next_cqe[c]
            off = (c * ms + k) * 16
            entry = _U32X4.unpack_from(cq, off) if cq is not None else mem.u32x4(_CQ, off)
            valid: int = entry[0]
            lo: int = entry[1]
            if valid != epoch + 1:
                break
            if self.kind == "write_imm":
                seen.append((lo & 1, (lo >> 1) & 0x7FFFFF))
            else:  # SEND: the tail is in the message, which must carry this epoch
                msg = mem_u64(mem, _RECV, (c * ms + k) * 16)
                if msg >> 48 != epoch + 1:
                    seen.append((-1, k))  # a stale message: report as a bad accept
                else:
                    seen.append((msg & 1, (msg >> 32) & 0xFFFF))
            self.next_cqe[c] += 1
        return seen

    def _word(self, word: int, n: int) -> tuple[int, int]:
        """(finish, tail) that a tail word says, for a channel of n tokens."""
        if self.epoch_base:
            word -= self.epoch * (pack2(FINISH, n) if self.pack else n)
        if self.pack:
            return unpack2(word & ((1 << 64) - 1))
        return int(word >= n), word

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        out: list[Consume] = []
        finished = self.finished
        if self.word:  # the signal bytes, for `_observe` (a subclass's too: it may call this one)
            bufs: dict[str, bytearray] | None = getattr(mem, "bufs", None)
            if bufs is not None and type(self) is DispatchReceiver:
                words = bufs[_SIGNAL]
                if len(words) == 8 * self.nch:
                    self._poll_words(out, words)
                    return out
            self._view, self._words = mem, None if bufs is None else bufs[_SIGNAL]
        elif type(self) is DispatchReceiver and (cqs := getattr(mem, "bufs", None)) is not None:
            seen = cq_seen(cqs, self.nch, self.ms, self.kind == "write_imm", epoch, finished, self.next_cqe)
            if seen is not None:  # completions, all channels' read at once
                for i in range(0, len(seen), 3):
                    self._accepted(out, seen[i], seen[i + 1], seen[i + 2])
                return out
        try:
            for c in range(self.nch):
                if finished[c]:
                    continue
                for finish, tail in self._observe(mem, c, epoch):
                    self._accepted(out, c, finish, tail)
        finally:  # the view's bytes may be replaced before the next poll: an `_observe` outside one reads anew
            self._view = self._words = None
        return out

    def _poll_words(self, out: list[Consume], words: bytearray) -> None:
        """`poll` of this very class over tail words in signal memory (`words`, one u64 per channel): every word
        read by one struct call and `_word` written out, not an `_observe` per channel, each a list, a tuple
        and a struct call (~2k instructions a channel, issue 31). A subclass may override `_observe` or
        `_word`: it polls through them (`poll`)."""
        vals: tuple[int, ...] = self._unpack_tails(words)  # `poll` checked the length
        counts = self.counts
        finished = self.finished
        pack, base = self.pack, self.epoch_base
        for c in range(self.nch):
            if finished[c]:
                continue
            n = counts[c]
            word = vals[c]
            if base:  # `_word`
                word -= self.epoch * (pack2(FINISH, n) if pack else n)
            if pack:
                if word < 0:  # `_word`'s mask: a no-op on a word read as u64 (a mask by 2**64 - 1 is a long's op)
                    word &= _MASK64
                self._accept(out, c, n, word & 0xFFFFFFFF, word >> 32)
            else:
                self._accept(out, c, n, int(word >= n), word)

    def _accepted(self, out: list[Consume], c: int, finish: int, tail: int) -> None:
        """What channel c's observation (finish, tail) makes the receiver accept (finish -1: a stale SEND message)."""
        if finish == -1:
            out.append(consume(_RECV, (c * self.ms + tail) * 16, 8, c, f"SEND message {tail} of channel {c}"))
        else:
            self._accept(out, c, self.counts[c], finish, tail)

    def _accept(self, out: list[Consume], c: int, n: int, finish: int, tail: int) -> None:
        """Consume the slots channel c's observation (finish, tail) announces beyond those it consumed."""
        tails = self.tail
        if tail > n:
            tail = n
        old = tails[c]
        if tail > old:
            out.append(consume(_DATA, (c * self.spc + old) * self.tb, (tail - old) * self.tb, c,
                               f"slots [{num_str(old)}, {num_str(tail)}) of channel {num_str(c)}"))
            tails[c] = tail
        if finish and tails[c] == n:
            self.finished[c] = True

    def done(self) -> bool:
        return all(self.finished)

    def state(self) -> tuple[Any, ...]:
        return (tuple(self.tail), tuple(self.finished), tuple(self.next_cqe))

    def restore(self, state: tuple[Any, ...]) -> None:
        self.tail, self.finished, self.next_cqe = list(state[0]), list(state[1]), list(state[2])
