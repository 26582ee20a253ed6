"""Receivers that wait for several signals before they read, and a protocol shell for small senders.

The dispatch receiver (`epfuzz.protocols.dispatch`) consumes a channel's slots as that channel's tail
moves. The other paths of DeepEP and of the 2026 field bugs wait differently: a combine reduces a token
only once every top-k contribution is in, so it reads nothing until every source has signalled
(`GatherReceiver`); V1 low-latency dispatch reads an expert's slots as soon as that expert's count word is
non-zero (`CountReceiver`); a baseline-relative wait reads the counter once, then waits for baseline +
k (`BaselineReceiver`). Each is a small `Receiver` with its state as plain tuples, so exhaustive
exploration (`epfuzz.sim.explore`) merges and restores it like the others.

`PathProtocol` is the shell the new built-ins share: a sender function, a receiver factory and the
`Protocol` attributes, so each protocol is data plus one small function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Consume, Layout, MemoryView, Pattern, Protocol, Receiver

MASK64 = (1 << 64) - 1

#: a sender: (scenario, layout, epoch) -> one op list per channel
Sender = Callable[[Scenario, Layout, int], list[list[ops.Op]]]
#: a receiver factory: (scenario, layout) -> a fresh receiver
ReceiverFactory = Callable[[Scenario, Layout], Receiver]
#: the receiver's own stores before epoch e: (scenario, layout, epoch) -> (region, offset, value, ordered)
Prologue = Callable[[Scenario, Layout, int], list[tuple[str, int, int, bool]]]


def all_slots(lay: Layout, what: str) -> list[Consume]:
    """One Consume per channel with tokens: every slot the epoch fills."""
    out = []
    for c, n in enumerate(lay.tokens_in_channel):
        if n:
            out.append(Consume(ops.DATA, lay.slot_offset(c, 0), n * lay.token_bytes, c,
                               f"slots [0, {n}) of channel {c} ({what})"))
    return out


class GatherReceiver(Receiver):
    """Reads every channel's slots at once, when `ready(word of channel c, epoch)` holds for every
    channel whose word it watches (`words`: the signal word of each source; by default word c).

    A combine's reduction needs every top-k contribution of a token, so it waits for all sources; a
    one-shot all-reduce waits for every peer's flag. `ready` is the protocol's test of one word: the
    exact value DeepEP's combine waits for, a flag colour, a non-zero count.
    """

    watch = frozenset({ops.SIGNAL})

    def __init__(self, scn: Scenario, lay: Layout, ready: Callable[[int, int, int], bool],
                 words: tuple[int, ...] | None = None, what: str = "every source signalled") -> None:
        self.lay = lay
        self.ready = ready  # (word value, channel, epoch) -> this source is in
        self.words = words if words is not None else tuple(range(lay.num_channels))
        self.what = what
        self.arrived = [False] * len(self.words)
        self.finished = False

    def start_epoch(self, epoch: int) -> None:
        self.arrived = [False] * len(self.words)
        self.finished = False

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        if self.finished:
            return []
        for i, w in enumerate(self.words):
            if not self.arrived[i] and self.ready(mem.u64(ops.SIGNAL, w * 8), i, epoch):
                self.arrived[i] = True
        if not all(self.arrived):
            return []
        self.finished = True
        return all_slots(self.lay, self.what)

    def done(self) -> bool:
        return self.finished

    def state(self) -> tuple[Any, ...]:
        return (tuple(self.arrived), self.finished)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.arrived, self.finished = list(state[0]), state[1]


class CountReceiver(Receiver):
    """DeepEP V1 low-latency dispatch: expert c's count word is 0 until the sender's signal of -n-1
    lands; the receiver spins until it is non-zero, decodes n = -value - 1 and reads slots [0, n)."""

    watch = frozenset({ops.SIGNAL})

    def __init__(self, scn: Scenario, lay: Layout) -> None:
        self.lay = lay
        self.finished = [False] * lay.num_channels

    def start_epoch(self, epoch: int) -> None:
        self.finished = [False] * self.lay.num_channels

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        out = []
        lay = self.lay
        for c in range(lay.num_channels):
            if self.finished[c]:
                continue
            word = mem.u64(ops.SIGNAL, c * 8)
            if word == 0:
                continue
            self.finished[c] = True
            n = min(lay.tokens_in_channel[c], max(0, (-word - 1) & MASK64))
            if n:
                out.append(Consume(ops.DATA, lay.slot_offset(c, 0), n * lay.token_bytes, c,
                                   f"slots [0, {n}) of expert {c} (count word -n-1, n = {n}, seen)"))
        return out

    def done(self) -> bool:
        return all(self.finished)

    def state(self) -> tuple[Any, ...]:
        return tuple(self.finished)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.finished = list(state)


class BaselineReceiver(Receiver):
    """nccl-tests' GIN alltoall: `base = readSignal(0)` at the receiver's first look of the epoch, then
    `waitSignal(0, base + k)`; once the counter reaches it, every channel's slots are read.

    The first look follows the receiver's own prologue store (its barrier arrival): if a peer's first
    increment became visible before that store, the baseline already counts it and base + k is never
    reached: the epoch hangs (NCCL #1990)."""

    watch = frozenset({ops.SIGNAL})

    def __init__(self, scn: Scenario, lay: Layout) -> None:
        self.lay = lay
        self.k = lay.num_channels  # one SignalInc per channel (CTA) a call
        self.base = -1
        self.finished = False

    def start_epoch(self, epoch: int) -> None:
        self.base = -1
        self.finished = False

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        if self.finished:
            return []
        word = mem.u64(ops.SIGNAL, 0)
        if self.base < 0:
            self.base = word
        if word < self.base + self.k:
            return []
        self.finished = True
        return all_slots(self.lay, f"signal reached baseline {self.base} + {self.k}")

    def done(self) -> bool:
        return self.finished

    def state(self) -> tuple[Any, ...]:
        return (self.base, self.finished)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.base, self.finished = state


class PathProtocol(Protocol):
    """A protocol as data: pinned fields, a sender, a receiver factory, an optional prologue.

    `options` sets the `Protocol` attributes (reset_signals, poison, release_at_accept,
    flush_on_accept, targets, signature_knobs, rx_map).
    """

    def __init__(self, name: str, doc: str, fixed: dict[str, Any], expect: str, sources: tuple[str, ...],
                 sender: Sender, receiver: ReceiverFactory, *, prologue: Prologue | None = None,
                 pattern: Pattern | None = None, **options: Any) -> None:
        self.name, self.doc, self.fixed, self.sources, self.pattern = name, doc, fixed, sources, pattern
        self.expect = expect  # type: ignore[assignment]
        self._sender, self._receiver, self._prologue = sender, receiver, prologue
        self._take_options(options, ("reset_signals", "poison", "release_at_accept", "flush_on_accept", "targets",
                                     "signature_knobs", "rx_map"), "PathProtocol")

    def sender(self, scn: Scenario, layout: Layout, epoch: int) -> list[list[ops.Op]]:
        return self._sender(scn, layout, epoch)

    def receiver(self, scn: Scenario, layout: Layout) -> Receiver:
        return self._receiver(scn, layout)

    def epoch_prologue(self, scn: Scenario, layout: Layout, epoch: int) -> list[tuple[str, int, int, bool]]:
        return [] if self._prologue is None else self._prologue(scn, layout, epoch)
