"""A built form's `Starts` shared by the memories of its runs (issue 31), and the in-place comparison of an
accepted range with the expected image, against the plain forms they replaced: the images a memory begins
from are its own copies (a run's writes never reach the next run), each epoch's expected image is
`expected_data`'s, and `same_as_expected` is the slices' equality on every range, to the byte."""

from __future__ import annotations

import random

import numpy as np

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build
from epfuzz.sim.memory import Memory, Starts, expected_data
from epfuzz.sim.packets import Tlp, TlpAction


def _layouts():  # type: ignore[no-untyped-def]
    for name, raw in (("deepep_v2_dispatch", b"\x01\x02\x03"), ("deep_gdr", b"\x07" * 40), ("dispatch_any", b"")):
        yield build(codec.decode(raw, name, "spec"), get_protocol(name)).layout


def _scribble(mem: Memory, rng: random.Random) -> None:
    """Land a few writes in every region: what a run leaves behind."""
    for region, buf in mem.bufs.items():
        for _ in range(4):
            if len(buf) < 8:
                continue
            t = Tlp()
            t.region, t.action, t.off, t.value, t.qp = region, TlpAction.VALUE, rng.randrange(len(buf) - 7), 7, 0
            mem.apply(t)
    t = Tlp()
    t.region, t.action, t.off, t.length, t.value = ops.DATA, TlpAction.STALE, 0, min(64, len(mem.bufs[ops.DATA])), 0
    mem.apply(t)


def test_runs_sharing_images_start_from_what_a_fresh_memory_starts_from() -> None:
    rng = random.Random(7)
    for layout in _layouts():
        shared = Starts()
        for epochs in ((0,), (0, 1), (1, 2), (0,)):
            mem, alone = Memory(layout, shared), Memory(layout)
            assert mem.snapshot() == alone.snapshot()
            for e in epochs:
                mem.start_epoch(e)
                alone.start_epoch(e)
                assert mem.snapshot() == alone.snapshot(), e
                _scribble(mem, rng)   # the shared images must not be what was written to
                _scribble(alone, rng)
        for k in (0, 1, 2):  # each epoch's image is made once, for every memory sharing the images
            assert Memory(layout, shared).expected_of(k) is shared.images[k]


def test_expected_of_every_epoch_is_expected_data() -> None:
    for layout in _layouts():
        mem = Memory(layout, Starts())
        for e in (0, 2, 1):
            mem.start_epoch(e)
            for k in (0, 1, 2):
                assert np.array_equal(mem.expected_of(k), expected_data(layout, k)), (e, k)
            assert mem.expected_of(e) is mem.expected


def test_same_as_expected_is_the_slices_equality() -> None:
    rng = random.Random(11)
    for layout in _layouts():
        mem = Memory(layout, Starts())
        mem.start_epoch(0)
        data = mem.bufs[ops.DATA]
        size = len(data)
        t = Tlp()  # the whole region landed: every range holds the image, until one byte is changed
        t.region, t.action, t.off, t.length, t.value = ops.DATA, TlpAction.COPY, 0, size, 0
        mem.apply(t)
        exp = mem.expected.tobytes()
        for _ in range(300):
            off = rng.randrange(size)
            length = rng.randrange(0, size - off + 1)
            flip = rng.choice([None, off, off + length - 1, off - 1, off + length, rng.randrange(size)])
            if flip is not None and 0 <= flip < size:
                data[flip] ^= 0x5A
            assert mem.same_as_expected(off, length) == (bytes(data[off:off + length]) == exp[off:off + length])
            if flip is not None and 0 <= flip < size:
                data[flip] ^= 0x5A


def test_a_copy_past_either_end_does_what_the_memoryviews_did() -> None:
    """A COPY past either end of the region or of the image, as the memoryviews write it: never resizing the
    region (a bytearray's slice assignment would: a faster COPY through bytearrays must keep to this), refused
    where the two lengths differ."""
    for layout in _layouts():
        size = len(Memory(layout).bufs[ops.DATA])
        for off, shift, n in ((size - 8, 16, 8), (0, -8, 16), (size - 4, 0, 8), (8, -16, 16), (0, 0, size),
                              (16, size - 20, 8), (size - 7, 0, 8)):
            mem = Memory(layout, Starts())
            ref = bytearray(mem.bufs[ops.DATA])
            src = mem.expected.tobytes()
            try:
                memoryview(ref)[off:off + n] = memoryview(src)[off + shift:off + shift + n]
                want: object = bytes(ref)
            except ValueError:
                want = ValueError
            t = Tlp()
            t.region, t.action, t.off, t.length, t.value = ops.DATA, TlpAction.COPY, off, n, shift
            try:
                mem.apply(t)
                got: object = bytes(mem.bufs[ops.DATA])
            except ValueError:
                got = ValueError
            assert got == want, (off, shift, n)
            assert len(mem.bufs[ops.DATA]) == size


def test_fresh_buffers_are_epoch_zeros_start_images_over_zeroed_regions() -> None:
    """A fresh memory (its data region made on first look, `epfuzz.sim.lazydata`) restates epoch 0's start for
    speed: held here to `start_images(layout, 0)` written over zeroed regions, the rule it restates."""
    from epfuzz.model.epoch import start_images

    for lay in _layouts():
        sizes = lay.sizes
        want = {name: bytearray(size) for name, size in sizes.items()}
        for name, image in start_images(lay, 0, poison=False, reset=False):
            want[name][:len(image)] = image
        shared = Starts()
        mem = Memory(lay, shared)
        got = mem.bufs
        assert got == want and all(type(b) is bytearray for b in got.values())
        assert list(got) == list(sizes)  # the layout's order (the data region, made on this first look, put first)
        for b in got.values():  # each a buffer of its own: writing one changes no later fresh buffer
            b[:] = b"\x5a" * len(b)
        assert Memory(lay, shared).bufs == want
