"""A one-channel receiver for the tests' own protocols: they differ only in when it accepts."""

from __future__ import annotations

from collections.abc import Callable

from epfuzz.ir import ops
from epfuzz.protocols.base import Consume, Layout, MemoryView, Receiver


class OneChannelReceiver(Receiver):
    """Accepts all of channel 0's bytes, once per epoch, when `ready(mem, epoch)` holds."""

    watch = frozenset({ops.SIGNAL})

    def __init__(self, layout: Layout, ready: Callable[[MemoryView, int], bool]) -> None:
        self.layout, self.ready, self.got = layout, ready, False

    def start_epoch(self, epoch: int) -> None:
        self.got = False

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        if self.got or not self.ready(mem, epoch):
            return []
        self.got = True
        return [Consume(ops.DATA, self.layout.slot_offset(0, 0),
                        self.layout.tokens_in_channel[0] * self.layout.token_bytes, 0, "channel 0")]

    def done(self) -> bool:
        return self.got

    def state(self) -> tuple[bool]:
        return (self.got,)

    def restore(self, state: tuple[bool]) -> None:
        (self.got,) = state
