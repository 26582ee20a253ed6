"""A plug-in whose WRITE_WITH_IMM immediate is a byte count, not a channel number (issue 19).

Each channel writes its tokens, then a zero-length WRITE_WITH_IMM on the same QP whose
immediate is the number of bytes written; the receiver finds it in entry 0 of its own
channel's CQ (the posting channel, as ops.WriteImm documents) and checks the count. Clean by
the IB rules (the CQE follows the QP's earlier data). A backend that routes the completion by
`imm >> 24` puts every channel's entry in channel 0 and reports a hang that does not exist.
"""

from __future__ import annotations

from typing import Any

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Consume, Layout, MemoryView, Protocol, Receiver


class ImmLengthReceiver(Receiver):
    watch = frozenset({ops.CQ})

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.got = [False] * layout.num_channels

    def start_epoch(self, epoch: int) -> None:
        self.got = [False] * self.layout.num_channels

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        lay = self.layout
        out = []
        for c, got in enumerate(self.got):
            n = lay.tokens_in_channel[c] * lay.token_bytes
            valid, imm, _, _ = mem.u32x4(ops.CQ, c * lay.max_signals * 16)
            if not got and valid == epoch + 1 and imm == n:
                self.got[c] = True
                out.append(Consume(ops.DATA, lay.slot_offset(c, 0), n, c, f"the {n} bytes of channel {c}"))
        return out

    def done(self) -> bool:
        return all(self.got)

    def state(self) -> tuple[Any, ...]:
        return tuple(self.got)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.got = list(state)


class ImmLength(Protocol):
    name = "imm_length"
    doc = "data, then a zero-length WRITE_WITH_IMM carrying the byte count, same QP, strict MR"
    expect = "clean"
    fixed = {"knobs.mr_relaxed": False}
    signature_knobs = ("knobs.mr_relaxed",)

    def sender(self, scn: Scenario, layout: Layout, epoch: int) -> list[list[ops.Op]]:
        progs = []
        for c in range(layout.num_channels):
            qp = scn.qp_of_channel(c)
            n = layout.tokens_in_channel[c] * layout.token_bytes
            prog: list[ops.Op] = [ops.Write(qp, ops.DATA, layout.slot_offset(c, 0), n)] if n else []
            prog.append(ops.WriteImm(qp, ops.DATA, 0, 0, imm=n, cq_slot=0))
            progs.append(prog)
        return progs

    def receiver(self, scn: Scenario, layout: Layout) -> Receiver:
        return ImmLengthReceiver(layout)
