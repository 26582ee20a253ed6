"""The dispatch receiver's read of its tail words accepts what a plain read through the view accepts.

`DispatchReceiver.poll` looks a view's signal bytes up once per poll and its `_observe` reads the tail
words from them (issue 31); a subclass that keeps `_observe` reads them so too, one that overrides it
reads as it likes. The compiled class, an interpreted subclass that changes nothing and a reference whose
`_observe` reads each word through the view's `u64` must consume the same bytes with the same words and
end in the same state, for random tail words (ahead of, at and past the channel's count, finish bit set
or not, counters carried from earlier epochs), every encoding and `epoch_base`, poll after poll.
"""

from __future__ import annotations

import random
import struct

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Consume, MemoryView
from epfuzz.protocols.dispatch import DispatchReceiver, pack2


class Observed(DispatchReceiver):
    """The same receiver as an interpreted subclass that changes nothing."""


class Reference(DispatchReceiver):
    """Each tail word read through the view's method, as a receiver without the poll's lookup would."""

    def _observe(self, mem: MemoryView, c: int, epoch: int) -> list[tuple[int, int]]:
        return [self._word(mem.u64(ops.SIGNAL, c * 8), self.counts[c])]


class Words:
    """A view with `bufs` (as `epfuzz.sim.memory.Memory` has) holding only tail words."""

    def __init__(self, channels: int) -> None:
        self.bufs = {ops.SIGNAL: bytearray(8 * channels)}

    def set(self, c: int, word: int) -> None:
        struct.pack_into("<Q", self.bufs[ops.SIGNAL], 8 * c, word & ((1 << 64) - 1))

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self.bufs[region][offset:offset + 8], "little")

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        raise AssertionError("a tail-word receiver reads no CQ entry")

    def read(self, region: str, offset: int, length: int) -> bytes:
        return bytes(self.bufs[region][offset:offset + length])


def _key(got: list[Consume]) -> list[tuple[object, ...]]:
    return [(c.region, c.offset, c.length, c.channel, c.what, c.invalidate) for c in got]


@pytest.mark.parametrize("kind", ["faa", "write"])
@pytest.mark.parametrize("encoding", ["pack2", "counter"])
@pytest.mark.parametrize("epoch_base", [False, True])
def test_direct_words_accept_what_observe_accepts(kind: str, encoding: str, epoch_base: bool) -> None:
    rng = random.Random(f"{kind}{encoding}{epoch_base}")
    for _ in range(60):
        chans = rng.randrange(1, 5)
        scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": rng.randrange(1, 12)},
                               "topology": {"num_channels": chans},
                               "signal": {"kind": kind, "encoding": encoding}})
        lay = get_protocol("dispatch_any").layout(scn)
        direct, observed = DispatchReceiver(scn, lay, epoch_base), Observed(scn, lay, epoch_base)
        reference = Reference(scn, lay, epoch_base)
        mem = Words(chans)
        for epoch in range(3):
            for rx in (direct, observed, reference):
                rx.start_epoch(epoch)
            for _ in range(6):
                c = rng.randrange(chans)
                n = lay.tokens_in_channel[c]
                tail, finish = rng.randrange(0, n + 3), rng.randrange(2)
                word = pack2(finish, tail) if encoding == "pack2" else tail
                if epoch_base and rng.randrange(3):  # what earlier epochs added, as the counters carry it
                    word += epoch * (pack2(1, n) if encoding == "pack2" else n)
                mem.set(c, word if rng.randrange(8) else rng.getrandbits(64))
                want = reference.poll(mem, epoch)
                for rx in (direct, observed):
                    assert _key(rx.poll(mem, epoch)) == _key(want)
                    assert rx.state() == reference.state() and rx.done() == reference.done()


def test_a_view_without_bufs_is_read_through_its_methods() -> None:
    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 4},
                           "topology": {"num_channels": 2}, "signal": {"kind": "faa", "encoding": "pack2"}})
    lay = get_protocol("dispatch_any").layout(scn)

    class Methods:
        def u64(self, region: str, offset: int) -> int:
            return pack2(1, 2)

    rx = DispatchReceiver(scn, lay)
    rx.start_epoch(0)
    got = rx.poll(Methods(), 0)  # type: ignore[arg-type]
    assert [(c.channel, c.length) for c in got] == [(0, 2 * lay.token_bytes), (1, 2 * lay.token_bytes)]
    assert rx.done()


class AllAtOnce(DispatchReceiver):
    """Observes every channel as finished with all its tokens, whatever the words say."""

    def _observe(self, mem: object, c: int, epoch: int) -> list[tuple[int, int]]:  # type: ignore[override]
        return [(1, self.lay.tokens_in_channel[c])]


def test_a_subclass_observe_runs_over_a_view_with_bufs() -> None:
    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 5},
                           "topology": {"num_channels": 2}, "signal": {"kind": "faa", "encoding": "pack2"}})
    lay = get_protocol("dispatch_any").layout(scn)
    rx = AllAtOnce(scn, lay)
    rx.start_epoch(0)
    got = rx.poll(Words(2), 0)  # every word 0: only the override accepts anything
    assert sum(c.length for c in got) == 5 * lay.token_bytes and rx.done()


class Completions(Words):
    """CQ and recv entries at `(channel * max_signals + slot) * 16`, read through `bufs` or (`methods`) only
    through the view's methods."""

    def __init__(self, channels: int, max_signals: int, methods: bool) -> None:
        size = channels * max_signals * 16
        self.regions = {ops.CQ: bytearray(size), ops.RECV: bytearray(size), ops.SIGNAL: bytearray(8 * channels)}
        if not methods:
            self.bufs = self.regions

    def put(self, region: str, offset: int, data: bytes) -> None:
        self.regions[region][offset:offset + len(data)] = data

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self.regions[region][offset:offset + 8], "little")

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        a, b, c, d = struct.unpack_from("<4I", self.regions[region], offset)
        return a, b, c, d


@pytest.mark.parametrize("kind", ["write_imm", "send"])
def test_completions_read_from_bufs_or_methods_agree(kind: str) -> None:
    rng = random.Random(kind)
    for _ in range(40):
        chans = rng.randrange(1, 4)
        scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": rng.randrange(1, 12)},
                               "topology": {"num_channels": chans}, "signal": {"kind": kind, "interval": 2}})
        lay = get_protocol("dispatch_any").layout(scn)
        rxs = [DispatchReceiver(scn, lay) for _ in range(2)]
        for epoch in range(2):
            views = [Completions(chans, lay.max_signals, methods) for methods in (False, True)]  # CQ reset
            for rx in rxs:
                rx.start_epoch(epoch)
            sent = [0] * chans
            for _ in range(5):
                c = rng.randrange(chans)
                k, n = sent[c], lay.tokens_in_channel[c]
                if k >= lay.max_signals:
                    continue
                tail = min(n, 2 * (k + 1))
                entry = (c * lay.max_signals + k) * 16
                stamp = epoch + 1 if rng.randrange(6) else epoch + 2  # now and then an entry of another epoch
                msg = rng.choice([epoch + 1, epoch + 1, 9]) << 48 | tail << 32 | c << 8 | (tail == n)
                for v in views:
                    v.put(ops.CQ, entry, struct.pack("<4I", stamp, (tail << 1) | (tail == n), 0, 0))
                    v.put(ops.RECV, entry, struct.pack("<Q", msg))
                sent[c] += 1
                got = [_key(rx.poll(v, epoch)) for rx, v in zip(rxs, views)]
                assert got[0] == got[1]
                assert rxs[0].state() == rxs[1].state()
                if stamp == epoch + 1 and kind == "write_imm":  # the entry read at its place: its slots accepted
                    assert rxs[0].tail[c] == tail or rxs[0].next_cqe[c] <= k


def test_observe_after_a_poll_reads_the_view_anew() -> None:
    """The signal bytes a poll looked up are its own: a view whose regions were replaced since (as `Memory`
    replaces its buffers) is read as it is now, by an `_observe` called outside a poll."""
    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 4},
                           "topology": {"num_channels": 1}, "signal": {"kind": "faa", "encoding": "pack2"}})
    lay = get_protocol("dispatch_any").layout(scn)
    rx = DispatchReceiver(scn, lay)
    rx.start_epoch(0)
    mem = Words(1)
    mem.set(0, pack2(0, 1))
    assert [c.length for c in rx.poll(mem, 0)] == [lay.token_bytes]
    mem.bufs = {ops.SIGNAL: bytearray(8)}
    mem.set(0, pack2(1, 3))
    assert rx._observe(mem, 0, 0) == [(1, 3)]
