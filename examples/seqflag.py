"""A user protocol written against epfuzz's plug-in API, from scratch.

"Sequence-flag mailbox": each channel RDMA-WRITEs a message into its mailbox,
then writes a 64-bit sequence flag (epoch + 1) next to it; the receiver polls the
flag and reads the message when the flag shows this epoch. `SeqFlag` posts the
flag as an RDMA WRITE (the classic bug under Relaxed Ordering or adaptive
routing); `SeqFlagAtomic` raises it with a fetch-and-add on a strict MR.

    epfuzz fuzz --protocol examples.seqflag:SeqFlag --time 30
    epfuzz fuzz --protocol examples.seqflag:SeqFlagAtomic --time 30
"""

from __future__ import annotations

from typing import Any

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Consume, Layout, MemoryView, Protocol, Receiver


class MailboxReceiver(Receiver):
    watch = frozenset({ops.SIGNAL})

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.got = [False] * layout.num_channels

    def start_epoch(self, epoch: int) -> None:
        self.got = [False] * self.layout.num_channels

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        out = []
        for c, got in enumerate(self.got):
            if not got and mem.u64(ops.SIGNAL, c * 8) == epoch + 1:
                self.got[c] = True
                n = self.layout.tokens_in_channel[c] * self.layout.token_bytes
                out.append(Consume(ops.DATA, self.layout.slot_offset(c, 0), n, c, f"mailbox {c}"))
        return out

    def done(self) -> bool:
        return all(self.got)

    def state(self) -> tuple[Any, ...]:
        return tuple(self.got)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.got = list(state)


class SeqFlag(Protocol):
    name = "seqflag"
    doc = "message, then a sequence flag by RDMA WRITE on the same QP"
    expect = "finding"
    fixed = {"knobs.mr_relaxed": True}
    sources = ("examples/seqflag.py",)
    # the signal fields of the scenario are not used by this protocol: keep them out of dedup
    signature_knobs = ("knobs.mr_relaxed", "knobs.nic_relaxed_ordering", "knobs.adaptive_routing")

    def sender(self, scn: Scenario, layout: Layout, epoch: int) -> list[list[ops.Op]]:
        progs = []
        for c in range(layout.num_channels):
            qp = scn.qp_of_channel(c)
            n = layout.tokens_in_channel[c] * layout.token_bytes
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, layout.slot_offset(c, 0), n)] if n else []
            prog.append(self.flag(qp, c, epoch))
            progs.append(prog)
        return progs

    def flag(self, qp: int, c: int, epoch: int) -> ops.Op:
        return ops.WriteValue(qp, ops.SIGNAL, c * 8, epoch + 1)

    def receiver(self, scn: Scenario, layout: Layout) -> Receiver:
        return MailboxReceiver(layout)


class SeqFlagAtomic(SeqFlag):
    name = "seqflag_atomic"
    doc = "message, then the flag raised by fetch-and-add (+1 per epoch) on a strict MR, same QP"
    expect = "clean"
    fixed = {"knobs.mr_relaxed": False}
    reset_signals = False  # the flag counts epochs: epoch e leaves e + 1

    def flag(self, qp: int, c: int, epoch: int) -> ops.Op:
        return ops.AtomicAdd(qp, ops.SIGNAL, c * 8, 1)
