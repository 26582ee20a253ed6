"""Watch-based polling (issue 31): a receiver that says what its poll reads (`Receiver.watch_bytes`)
is polled only after a TLP that changed some of those bytes; one that says nothing is polled after
every TLP landing in a region it watches, as before."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK
from epfuzz.ir.scenario import Scenario
from epfuzz.model.ordering import Attrs, TlpType
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Consume, Layout, MemoryView
from epfuzz.protocols.dispatch import DispatchProtocol, DispatchReceiver
from epfuzz.sim import engine
from epfuzz.sim.packets import LocalStore, Tlp, TlpAction
from epfuzz.sim.receive import Receiving


class Counting(DispatchReceiver):
    """DeepEP's forward warp, counting its polls; `spans` is what it tells the emulator it reads."""

    spans: Mapping[str, Sequence[tuple[int, int]]] | None = None

    def __init__(self, scn: Scenario, lay: Layout) -> None:
        super().__init__(scn, lay)
        self.polls = 0

    def watch_bytes(self) -> Mapping[str, Sequence[tuple[int, int]]] | None:
        return self.spans

    total = 0  # polls of every instance of the class

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        self.polls += 1
        type(self).total += 1
        return super().poll(mem, epoch)


class Trailers(Counting):
    """Watches the data too, but only each slot's last chunk (as the deep zoo's guarded receiver)."""

    def __init__(self, scn: Scenario, lay: Layout) -> None:
        super().__init__(scn, lay)
        self.watch = self.watch | {ops.DATA}

    def watch_bytes(self) -> Mapping[str, Sequence[tuple[int, int]]] | None:
        lay = self.lay
        return {ops.DATA: [(lay.slot_offset(c, i) + lay.token_bytes - CHUNK, CHUNK)
                           for c, n in enumerate(lay.tokens_in_channel) for i in range(n)]}


def _step(cls: type[Counting], spans: Mapping[str, Sequence[tuple[int, int]]] | None = None
          ) -> tuple[Receiving, Counting]:
    said = type(cls.__name__, (cls,), {"spans": spans})
    proto = DispatchProtocol("counting", "", {}, "clean", receiver_cls=said)
    scn = codec.decode(b"", "dispatch_any").with_path("payload.num_tokens", 2)
    step = Receiving(scn, proto, proto.layout(scn), [])
    rx = step.rx
    assert isinstance(rx, Counting)
    step.start_epoch(0)
    return step, rx


def _tlp(action: TlpAction, region: str, off: int, length: int, value: int = 0, seq: int = 0) -> Tlp:
    t = Tlp()
    t.seq, t.n, t.mps, t.epoch, t.attrs, t.action = seq, 1, 4096, 0, Attrs(TlpType.POSTED), action
    t.qp, t.region, t.off, t.length, t.value = 0, region, off, length, value
    t.dep, t.hold, t.pkt, t.wr, t.target, t.local = -1, False, 0, 0, 0, LocalStore.NONE
    return t


def _landed(step: Receiving, rx: Counting, t: Tlp) -> int:
    before = rx.polls
    step.land(t, 1)  # a stale accept or not: what counts here is whether it looked
    return rx.polls - before


def test_unchanged_watched_bytes_are_not_polled_changed_ones_are() -> None:
    step, rx = _step(Counting, {})
    assert _landed(step, rx, _tlp(TlpAction.READ, ops.SIGNAL, 0, 8)) == 0       # an RMW's read: no change
    assert _landed(step, rx, _tlp(TlpAction.VALUE, ops.SIGNAL, 0, 8, 0)) == 0   # writes the 0 already there
    assert _landed(step, rx, _tlp(TlpAction.ADD, ops.SIGNAL, 0, 8, 0)) == 0     # adds nothing
    assert _landed(step, rx, _tlp(TlpAction.ADD, ops.SIGNAL, 0, 8, 1 << 32)) == 1  # the tail moves
    assert _landed(step, rx, _tlp(TlpAction.VALUE, ops.SIGNAL, 0, 8, 7)) == 1
    assert step.skipped == 3


def test_a_receiver_that_says_nothing_is_polled_after_every_watched_tlp() -> None:
    step, rx = _step(Counting, None)
    assert _landed(step, rx, _tlp(TlpAction.READ, ops.SIGNAL, 0, 8)) == 1
    assert _landed(step, rx, _tlp(TlpAction.VALUE, ops.SIGNAL, 0, 8, 0)) == 1
    assert _landed(step, rx, _tlp(TlpAction.COPY, ops.DATA, 0, 64)) == 0       # not a watched region
    assert step.skipped == 0


def test_only_the_watched_spans_of_a_region_wake_it() -> None:
    step, rx = _step(Trailers)
    tb = step.mem.layout.token_bytes
    assert _landed(step, rx, _tlp(TlpAction.COPY, ops.DATA, 0, tb - CHUNK)) == 0    # the slot up to its trailer
    assert _landed(step, rx, _tlp(TlpAction.COPY, ops.DATA, tb - CHUNK, CHUNK)) == 1  # the trailer lands
    assert _landed(step, rx, _tlp(TlpAction.COPY, ops.DATA, tb - CHUNK, CHUNK)) == 0  # the same bytes again
    assert _landed(step, rx, _tlp(TlpAction.COPY, ops.DATA, tb, 2 * tb)) == 1       # spans the next trailer


def test_skipped_polls_change_no_run() -> None:
    """Random scenarios with and without watch_bytes (and the built-in receiver, which says it): the
    same records, and fewer polls where the receiver said what it reads (mode-0 atomics' reads)."""
    class Says(Counting):
        spans: Mapping[str, Sequence[tuple[int, int]]] | None = {}
        total = 0

    class Silent(Counting):
        total = 0

    says = DispatchProtocol("dispatch_any", "", {}, "clean", receiver_cls=Says)
    silent = DispatchProtocol("dispatch_any", "", {}, "clean", receiver_cls=Silent)
    base = get_protocol("dispatch_any")
    rng = random.Random(3)
    for _ in range(80):
        scn = codec.decode(rng.randbytes(rng.randrange(8, 64)), "dispatch_any", "mlx5-default")
        runs = [engine.replay(engine.build(scn, p), p) for p in (says, silent, base)]
        recs = [(r.violation.summary() if r.violation else None, r.culprit_rules(), r.fingerprint()) for r in runs]
        assert recs[0] == recs[1] == recs[2]
    assert 0 < Says.total < Silent.total
