"""Copy-engine batches without order (NCCL 9b6a9db2, field note N3; the layer is `epfuzz.model.cebatch`).

NCCL's zero-SM put-with-signal over the copy engine put the data copies and the 8-byte signal copies
of a launch into one batched memcpy, whose copies have no order among them. Two bugs, each a pair:

- `ce_batch_signal`: a channel's data copies and its signal copy (the sequence number after them) in
  one batch: the signal may land before the data (`CE-batch`). Fixed: a data batch, then a signal
  batch (the stream orders the second after the first: `CE-stream`).
- `ce_signal_override`: the data batch first (fixed as above), but one signal copy per put, all to
  the channel's one signal slot, in one signal batch: an earlier sequence number may land last and
  overwrite a later one. The signals are monotonic counters that are never reset, and the receiver
  waits the way NCCL's does, for its baseline (the word at its first look of the call) plus the puts
  it expects. A word that reached that and then regressed is a wait a later poller never sees end: a
  **hang** (`BaselineSeqReceiver`). Fixed: at most one signal per slot per batch (one batch each).

The regression check is the receiver's, not the oracle's: a signal value it relies on must still
satisfy its wait when the call's traffic is all visible.
"""

from __future__ import annotations

from typing import Any

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Consume, Layout, MemoryView, Receiver
from epfuzz.protocols.dispatch import data_wrs
from epfuzz.protocols.gather import PathProtocol, Sender


class BaselineSeqReceiver(Receiver):
    """Per channel: `base = word` at the receiver's first look of the call, then wait until the word
    reaches base + n (the channel's puts this call) and read its n slots (NCCL's readSignal/waitSignal).

    The wait must also still hold at the call's end: a waiter polls when it polls, and the emulator's
    instant looks would otherwise always catch a value that is overwritten a moment later. A signal that
    reached the target and then regressed below it (an earlier sequence number landing last) is a wait
    that a later poller never sees end: `done` is false and the call is reported as a hang."""

    watch = frozenset({ops.SIGNAL})

    def __init__(self, scn: Scenario, lay: Layout) -> None:
        self.lay = lay
        self.base: tuple[int, ...] = ()
        self.got: tuple[bool, ...] = ()
        self.holds: tuple[bool, ...] = ()  # per channel: the wait's condition holds at the last look

    def start_epoch(self, epoch: int) -> None:
        self.base = ()
        self.got = tuple(n == 0 for n in self.lay.tokens_in_channel)
        self.holds = self.got

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        lay = self.lay
        words = [mem.u64(ops.SIGNAL, c * 8) for c in range(lay.num_channels)]
        if not self.base:
            self.base = tuple(words)
        out, got = [], list(self.got)
        self.holds = tuple(n == 0 or words[c] >= self.base[c] + n for c, n in enumerate(lay.tokens_in_channel))
        for c, n in enumerate(lay.tokens_in_channel):
            if not got[c] and self.holds[c]:
                got[c] = True
                out.append(Consume(ops.DATA, lay.slot_offset(c, 0), n * lay.token_bytes, c,
                                   f"slots [0, {n}) of channel {c} (signal {words[c]} reached baseline "
                                   f"{self.base[c]} + {n})"))
        self.got = tuple(got)
        return out

    def done(self) -> bool:
        return all(self.got) and all(self.holds)

    def state(self) -> tuple[Any, ...]:
        return (self.base, self.got, self.holds)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.base, self.got, self.holds = state


def _ce_sender(data_then_signal: bool, signals: str) -> Sender:
    """Per channel on its lane: the data copies and the signal copies, in one batch or (`data_then_signal`) a
    data batch then signal batches; `signals` "last" (one copy: the call's last number), "each in one" (one
    copy per put, all in one batch) or "each alone" (one copy per put, a batch each)."""
    def sender(scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        programs = []
        for c in range(lay.num_channels):
            qp, n = scn.qp_of_channel(c), lay.tokens_in_channel[c]
            prog: list[ops.Op] = [ops.CeCopy(qp, ops.DATA, off, length, 0)
                                  for _, _, off, length in data_wrs(scn, lay, c)]
            first = 1 if data_then_signal else 0
            if n and signals == "last":
                prog.append(ops.CeValue(qp, ops.SIGNAL, c * 8, (epoch + 1) * n, first))
            elif n:  # one signal per put: all in one batch, or a batch each
                alone = signals == "each alone"
                prog += [ops.CeValue(qp, ops.SIGNAL, c * 8, epoch * n + i + 1, first + (i if alone else 0))
                         for i in range(n)]
            programs.append(prog)
        return programs
    return sender


#: an intra-node copy engine: no fabric to reorder packets; the signals are never reset (monotonic counters)
_CE = {"knobs.adaptive_routing": False, "signal.kind": "write", "signal.other_qp": False, "signal.fence": False}
_N3 = ("NCCL 9b6a9db2", "field note N3")

CE_BATCH_SIGNAL = PathProtocol(
    "ce_batch_signal", "copy-engine put with signal: the data copies and the signal copy in one batched memcpy, "
    "which has no order among its copies: the signal may land before the data (CE-batch)", dict(_CE), "finding",
    _N3, _ce_sender(False, "last"), BaselineSeqReceiver, reset_signals=False)
CE_BATCH_SIGNAL_FIXED = PathProtocol(
    "ce_batch_signal_fixed", "a data batch, then a signal batch: the stream issues the second once the first "
    "completed (CE-stream)", dict(_CE), "clean", _N3, _ce_sender(True, "last"), BaselineSeqReceiver,
    reset_signals=False)
CE_SIGNAL_OVERRIDE = PathProtocol(
    "ce_signal_override", "a data batch, then every put's signal copy to the one slot in one batch: an earlier "
    "sequence number may land last (CE-batch) and the word regresses below what the waiter waits for (hang)",
    dict(_CE), "finding", _N3, _ce_sender(True, "each in one"), BaselineSeqReceiver, reset_signals=False)
CE_SIGNAL_OVERRIDE_FIXED = PathProtocol(
    "ce_signal_override_fixed", "at most one signal copy per slot per batch (a batch each, in stream order)",
    dict(_CE), "clean", _N3, _ce_sender(True, "each alone"), BaselineSeqReceiver, reset_signals=False)

PROTOCOLS = (CE_BATCH_SIGNAL, CE_BATCH_SIGNAL_FIXED, CE_SIGNAL_OVERRIDE, CE_SIGNAL_OVERRIDE_FIXED)
#: (title, bad, fixed) per pair (tests/zoo/test_cebatch_zoo.py, bench/fixed_budget.py)
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("data and signal copies in one copy-engine batch", CE_BATCH_SIGNAL.name, CE_BATCH_SIGNAL_FIXED.name),
    ("two signal copies to one slot in one batch (signal override)", CE_SIGNAL_OVERRIDE.name,
     CE_SIGNAL_OVERRIDE_FIXED.name),
)
