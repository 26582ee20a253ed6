"""Plug-ins subclass the built-in senders and receivers, which mypyc compiles (`epfuzz.core.native.COMPILED`).

A compiled poll calls its helpers (`_observe`, `_stamped`) through the instance, so an interpreted
subclass's override must run in their place, and a subclass's own `__init__` must reach the compiled
one's. These run on whichever path this process loaded (compiled where built, pure under
EPFUZZ_PURE=1): the same answers on both.
"""

from __future__ import annotations

from typing import Any

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Layout, MemoryView
from epfuzz.protocols.deep import GuardedDispatch, GuardedReceiver
from epfuzz.protocols.dispatch import DispatchReceiver
from epfuzz.sim.engine import simulate


class Signalled:
    """Signal word pack2(finish 1, tail = `tail`) on every channel; every data chunk still poison (no stamp)."""

    def __init__(self, tail: int) -> None:
        self.tail = tail

    def u64(self, region: str, offset: int) -> int:
        return (self.tail << 32) | 1 if region == ops.SIGNAL else 0

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        return (0xC0DE0000, 0, 0, 0)

    def read(self, region: str, offset: int, length: int) -> bytes:
        return bytes(length)


class TrustSignal(GuardedReceiver):
    """The guarded receiver with its trailer check overridden away: the signal alone is trusted."""

    def __init__(self, scn: Any, lay: Layout, **opts: Any) -> None:
        super().__init__(scn, lay, **opts)
        self.checked: list[int] = []

    def _stamped(self, mem: MemoryView, c: int, slot: int, epoch: int) -> bool:
        self.checked.append(slot)
        return True


class AllAtOnce(DispatchReceiver):
    """Observes every channel as finished with all its tokens, whatever memory says."""

    def _observe(self, mem: MemoryView, c: int, epoch: int) -> list[tuple[int, int]]:
        return [(1, self.lay.tokens_in_channel[c])]


def _scenario(name: str) -> tuple[Any, Any, Layout]:
    scn = codec.load_dict({"protocol": name, "payload": {"num_tokens": 2}, "topology": {"num_channels": 1}})
    proto = get_protocol(name)
    return scn, proto, proto.layout(scn)


def test_an_interpreted_override_of_a_compiled_helper_runs() -> None:
    scn, _, lay = _scenario("deep_ro_signal")
    guarded = GuardedReceiver(scn, lay)
    guarded.start_epoch(0)
    assert guarded.poll(Signalled(2), 0) == []  # no stamp: nothing read
    trusting = TrustSignal(scn, lay)
    trusting.start_epoch(0)
    got = trusting.poll(Signalled(2), 0)
    assert [(c.offset, c.length) for c in got] == [(0, 2 * lay.token_bytes)] and trusting.checked == [0, 1]
    assert trusting.done()


def test_an_interpreted_observe_replaces_the_compiled_one() -> None:
    scn, _, lay = _scenario("dispatch_any")
    rx = AllAtOnce(scn, lay)
    rx.start_epoch(0)
    got = rx.poll(Signalled(0), 0)
    assert sum(c.length for c in got) == sum(lay.tokens_in_channel) * lay.token_bytes and rx.done()


def test_a_subclassed_sender_runs_its_own_receiver_through_the_emulator() -> None:
    """A plug-in protocol: the compiled guarded sender, its receiver swapped for the trusting one, a class
    attribute and an __init__ of its own; the emulator polls the plug-in's receiver, whose override runs."""
    polled: list[TrustSignal] = []

    class Counted(TrustSignal):
        def __init__(self, scn: Any, lay: Layout, **opts: Any) -> None:
            super().__init__(scn, lay, **opts)
            polled.append(self)

    class Trusting(GuardedDispatch):
        home_preset = "nvlink"

        def __init__(self) -> None:
            base = get_protocol("deep_ro_signal")
            super().__init__("trusting", "", dict(base.fixed), "finding", flush_before_signal=True)
            self.receiver_cls = Counted

    proto = Trusting()
    assert proto.home_preset == "nvlink" and proto.flush_before_signal and proto.name == "trusting"
    scn, _, _ = _scenario("deep_ro_signal")
    run = simulate(scn, proto)
    assert run.violation is None and polled and polled[-1].checked == [0, 1] and polled[-1].done()
    assert any(isinstance(op, ops.Flush) for op in proto.sender(scn, proto.layout(scn), 0)[0])


def test_the_memory_readers_still_import_from_dispatch():
    """Plug-ins read memory with `epfuzz.protocols.dispatch.mem_u64` and its siblings (base.MemoryView's
    docstring named that path until issue 31 moved them to `memread`): the old path still serves all four."""
    from epfuzz.protocols import dispatch, memread

    for name in ("mem_u64", "buf_u64", "mem_u32x4", "mem_read"):
        assert getattr(dispatch, name) is getattr(memread, name), name
