"""Receiver memory made as epoch 0 starts it (`Memory.__init__`, issue 31) against the reference it replaced:
zeroed buffers, then each `start_epoch`'s writes copied over them: the epoch's canary over the data region when
the protocol poisons, zeroed signal, CQ and receive regions when it resets, both always at epoch 0."""

from __future__ import annotations

import itertools

from epfuzz.encoding import codec
from epfuzz.ir.payload import canary
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build
from epfuzz.sim.memory import Memory, Starts


def _reference(layout, calls):  # type: ignore[no-untyped-def]
    bufs = {name: bytearray(size) for name, size in layout.sizes.items()}
    for epoch, poison, reset in calls:
        if poison or epoch == 0:
            bufs["data"][:] = canary(epoch, layout.sizes["data"]).tobytes()
        if reset or epoch == 0:
            for name in ("signal", "cq", "recv"):
                bufs[name][:] = bytes(layout.sizes[name])
    return {k: bytes(v) for k, v in bufs.items()}


def _layouts():  # type: ignore[no-untyped-def]
    for name, raw in (("deepep_v2_dispatch", b"\x01\x02\x03"), ("deep_gdr", b"\x07" * 40), ("dispatch_any", b"")):
        scn = codec.decode(raw, name, "spec")
        yield build(scn, get_protocol(name)).layout


def test_first_start_of_any_epoch_matches_the_reference() -> None:
    for layout in _layouts():
        for first, poison, reset in itertools.product((0, 1, 2), (True, False), (True, False)):
            for shared in (None, Starts()):
                mem = Memory(layout, shared)
                mem.start_epoch(first, poison, reset)
                assert mem.snapshot() == _reference(layout, [(first, poison, reset)]), (first, poison, reset)
                assert mem.epoch == first


def test_a_later_start_after_landing_writes_again() -> None:
    from epfuzz.sim.packets import Tlp, TlpAction

    for layout in _layouts():
        mem = Memory(layout, Starts())
        mem.start_epoch(0, False, False)
        t = Tlp()
        t.region, t.action, t.off, t.value, t.qp = "signal", TlpAction.VALUE, 0, 7, 0
        mem.apply(t)
        assert mem.u64("signal", 0) == 7
        mem.start_epoch(0, True, True)  # a re-start of epoch 0 after data landed resets what it writes
        assert mem.snapshot() == _reference(layout, [(0, True, True)])


def test_a_start_after_writes_through_the_views_writes_again() -> None:
    for layout in _layouts():
        mem = Memory(layout)
        mem.regions["signal"][:] = 9  # exploration writes memory through the views
        mem.start_epoch(0)
        assert mem.snapshot() == _reference(layout, [(0, True, True)])
