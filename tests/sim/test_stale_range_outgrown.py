"""A stale-accept check on a lazy data region whose layout's region outgrows its slots (a plug-in's `sizes`):
judged as when the region was made (review2 of issue 31's range judge: `lazy_range` declines such a layout, and
`judge` raised on the range past the image, a ValueError, where the byte compare had answered)."""

from __future__ import annotations

import dataclasses

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols.base import Consume, Layout, Protocol, Receiver
from epfuzz.sim.engine import simulate


@dataclasses.dataclass(frozen=True, slots=True)
class _Big(Layout):
    @property
    def sizes(self) -> dict[str, int]:
        s = Layout.sizes.fget(self)  # type: ignore[attr-defined]
        s[ops.DATA] += 64
        return s


class _Rx(Receiver):
    def __init__(self, layout: Layout, read_bufs: bool) -> None:
        self.layout, self.read_bufs, self.got = layout, read_bufs, False

    def start_epoch(self, epoch: int) -> None:
        self.got = False

    def poll(self, mem, epoch):  # type: ignore[no-untyped-def]
        if self.read_bufs:
            _ = mem.bufs[ops.DATA]  # the region made at once: the byte compare
        if self.got or mem.u64(ops.SIGNAL, 0) != epoch + 1:
            return []
        self.got = True
        # channel 0's first slot and 5 bytes past it (here: past the image, into the region's extra bytes)
        return [Consume(ops.DATA, 8, self.layout.token_bytes + 5, 0, "past the slots")]

    def done(self) -> bool:
        return self.got

    def state(self):  # type: ignore[no-untyped-def]
        return (self.got,)

    def restore(self, st) -> None:  # type: ignore[no-untyped-def]
        self.got = st[0]


class _Outgrown(Protocol):
    name = "outgrown"
    doc = "a data region 64 bytes past its slots"
    read_bufs = False

    def layout(self, scn):  # type: ignore[no-untyped-def]
        lay = super().layout(scn)
        return _Big(1, lay.slots_per_channel, lay.token_bytes, lay.max_signals, lay.tokens_in_channel[:1])

    def sender(self, scn, layout, epoch):  # type: ignore[no-untyped-def]
        qp = scn.qp_of_channel(0)
        n = layout.tokens_in_channel[0] * layout.token_bytes
        return [([ops.Write(qp, ops.DATA, 0, n)] if n else []) + [ops.WriteValue(qp, ops.SIGNAL, 0, epoch + 1)]]

    def receiver(self, scn, layout):  # type: ignore[no-untyped-def]
        return _Rx(layout, self.read_bufs)


class _OutgrownMade(_Outgrown):
    read_bufs = True


@pytest.mark.parametrize("epochs", [1, 2])
def test_outgrown_region_judged_as_when_made(epochs: int) -> None:
    scn = codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 1},
                           "payload": {"num_tokens": 1, "epochs": epochs}})
    made = simulate(scn, _OutgrownMade())
    lazy = simulate(scn, _Outgrown())  # raised ValueError (operands could not be broadcast)
    assert made.violation is None and lazy.violation is None
