"""A plug-in whose receiver never completes, for the pre-flight tests (tests/zoo, tests/cli)."""

from __future__ import annotations

from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Protocol


class NeverDone(Protocol):
    """The seqflag example with a receiver whose done() never returns True."""

    def __init__(self) -> None:
        self.base = get_protocol("examples.seqflag:SeqFlag")
        self.fixed = {"knobs.mr_relaxed": False}

    def sender(self, scn, layout, epoch):
        return self.base.sender(scn, layout, epoch)

    def receiver(self, scn, layout):
        rx = self.base.receiver(scn, layout)
        rx.done = lambda: False
        return rx
