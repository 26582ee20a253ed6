"""The data region made only when something reads it (`epfuzz.sim.lazydata`, issue 31): a memory that keeps it
lazy holds, whenever anything looks, the very bytes of one that made it at once, and answers `same_as_expected`
as the byte compare does; its covered ranges are those of a byte-by-byte model."""

from __future__ import annotations

import random

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Layout
from epfuzz.sim.engine import build
from epfuzz.sim.lazydata import Lazy
from epfuzz.sim.memory import Memory, Starts
from epfuzz.sim.packets import Tlp, TlpAction


def _layouts():  # type: ignore[no-untyped-def]
    for name, raw in (("deepep_v2_dispatch", b"\x01\x02\x03"), ("deep_gdr", b"\x07" * 40), ("dispatch_any", b"")):
        yield build(codec.decode(raw, name, "spec"), get_protocol(name)).layout


def _lazy(mem: Memory) -> bool:
    return not dict.__contains__(mem.bufs, ops.DATA)


def _tlp(rng: random.Random, size: int, shifted: bool) -> Tlp:
    t = Tlp()
    t.region, t.qp = ops.DATA, 0
    t.length = rng.randrange(1, min(size, 600) + 1)
    t.off = rng.randrange(0, size - t.length + 1)
    t.action, t.value = TlpAction.COPY, 0
    if shifted:
        t.action, t.value = rng.choice([(TlpAction.COPY, -(t.off // 16) * 16), (TlpAction.STALE, 0)])
    return t


def test_cover_is_the_set_of_covered_bytes() -> None:
    rng = random.Random(5)
    for _ in range(200):
        lz = Lazy(None, Starts(), 256, {})  # type: ignore[arg-type]
        model: set[int] = set()
        for _ in range(rng.randrange(1, 12)):
            a = rng.randrange(256)
            b = rng.randrange(a + 1, 257)
            lz.cover(a, b)
            model |= set(range(a, b))
            assert all(lz.lo[i] < lz.hi[i] < lz.lo[i + 1] for i in range(len(lz.lo) - 1))
            assert set().union(*(range(x, y) for x, y in zip(lz.lo, lz.hi))) == model
            for _ in range(20):
                x = rng.randrange(257)
                y = rng.randrange(x, 257)
                assert lz.covers(x, y) == (set(range(x, y)) <= model), (x, y, lz.lo, lz.hi)


def test_a_lazy_region_reads_as_one_made_at_once() -> None:
    rng = random.Random(23)
    for layout in _layouts():
        shared = Starts()
        for trial in range(40):
            lazy, eager = Memory(layout, shared), Memory(layout, shared if trial % 2 else Starts())
            eager.bufs[ops.DATA]  # made now: every later write lands in its bytes
            size = eager.data_len
            assert lazy.data_len == size
            # only expected bytes landed since poisoned starts and only those asked about: the lazy one makes nothing
            kept, covered = True, set()
            for _ in range(rng.randrange(1, 4)):
                epoch, poison, reset = rng.randrange(4), rng.random() < 0.8, rng.random() < 0.8
                poisons = poison or epoch == 0  # epoch 0 always starts poisoned (`start_images`)
                kept = kept and (poisons or not covered)  # an unpoisoned start keeps what landed: made now
                covered = set() if poisons else covered
                for m in (lazy, eager):
                    m.start_epoch(epoch, poison, reset)
                for _ in range(rng.randrange(0, 30)):
                    t = _tlp(rng, size, rng.random() < 0.03)
                    kept = kept and t.action == TlpAction.COPY and t.value == 0
                    covered |= set(range(t.off, t.off + t.length))
                    for m in (lazy, eager):
                        m.apply(t)
                    if rng.random() < 0.3:
                        off = rng.randrange(size)
                        n = rng.randrange(0, size - off + 1)
                        want = eager.same_as_expected(off, n)
                        was = _lazy(lazy)
                        got = lazy.lazy_range(off, n)  # bytes and expected bytes of the range, nothing made
                        assert _lazy(lazy) == was and (got is not None or not was or n == 0)
                        assert got is None or got == (bytes(eager.bufs[ops.DATA][off:off + n]),
                                                      eager.expected[off:off + n].tobytes())
                        wholly = set(range(off, off + n)) <= covered
                        assert lazy.same_as_expected(off, n, False) == (wholly if was else want)
                        kept = kept and set(range(off, off + n)) <= covered
                        assert lazy.same_as_expected(off, n) == want
                assert _lazy(lazy) == kept
            assert lazy.expected is eager.expected or (lazy.expected == eager.expected).all()
            if rng.random() < 0.5:
                assert lazy.u32x4(ops.DATA, 16) == eager.u32x4(ops.DATA, 16)
            assert lazy.snapshot() == eager.snapshot()
            assert list(lazy.bufs) == list(eager.bufs) == list(layout.sizes)
            assert not _lazy(lazy)


def test_a_receiver_reading_the_region_gets_its_bytes() -> None:
    """What reads `bufs` through its other methods sees the data region too (a plug-in may iterate it), and a
    `bufs` kept from before the region was made reads the same buffers as the memory's after."""
    for layout in _layouts():
        for look in (lambda m: m.bufs.get(ops.DATA), lambda m: dict(m.bufs)[ops.DATA], lambda m: ops.DATA in m.bufs,
                     lambda m: len(m.bufs), lambda m: list(m.bufs.values()), lambda m: m.regions[ops.DATA],
                     lambda m: m.same_as_expected(0, m.data_len), lambda m: m.read(ops.DATA, 0, 16),
                     lambda m: sorted(m.bufs.items())):
            mem, ref = Memory(layout), Memory(layout)
            ref.bufs[ops.DATA]
            for m in (mem, ref):
                m.start_epoch(1)
            kept = mem.bufs
            t = _tlp(random.Random(3), mem.data_len, False)
            for m in (mem, ref):
                m.apply(t)
            look(mem)
            assert not _lazy(mem)
            assert dict.__getitem__(mem.bufs, ops.DATA) == ref.bufs[ops.DATA]
            assert kept[ops.DATA] is mem.bufs[ops.DATA] and dict(kept) == mem.bufs
            assert list(kept) == list(mem.bufs) == list(layout.sizes)


def test_bufs_read_by_its_other_dict_methods_sees_the_region() -> None:
    """`reversed`, `setdefault`, `pop` and `popitem` on a lazy memory's `bufs` answer as on one whose region was
    made at once: the data region is there for them too (dict's own methods skip `__missing__`), and `setdefault`
    stores nothing in place of it (review)."""
    for layout in _layouts():
        for look in (lambda b: list(reversed(b)), lambda b: b.setdefault(ops.DATA, bytearray(1)),
                     lambda b: b.pop(ops.DATA), lambda b: b.pop(ops.DATA, None), lambda b: b.popitem(),
                     lambda b: (b.popitem(), b.popitem(), b.popitem(), b.popitem())):
            mem, ref = Memory(layout), Memory(layout)
            ref.bufs[ops.DATA]
            t = _tlp(random.Random(7), mem.data_len, False)
            for m in (mem, ref):
                m.start_epoch(1)
                m.apply(t)
            assert look(mem.bufs) == look(ref.bufs)
            assert not mem._lz.on
            assert dict(mem.bufs) == dict(ref.bufs) and list(mem.bufs) == list(ref.bufs)


def test_a_memory_asked_not_to_wait_makes_its_data_region_at_once() -> None:
    """`lazy` False (a receiver that watches the data region): the region made with the memory, the same bytes."""
    for layout in _layouts():
        shared = Starts()
        for _ in range(3):  # the first memory of a configuration, and those from its template
            mem = Memory(layout, shared, lazy=False)
            assert not _lazy(mem) and type(mem.bufs) is dict
            assert mem.snapshot() == Memory(layout).snapshot()



def test_a_read_of_the_data_region_makes_no_bytes() -> None:
    """A READ or FETCH TLP writes nothing: landing one on the lazy data region leaves it lazy (review)."""
    mem = Memory(Layout(1, 2, 32, 2, (2,)))
    for action in (TlpAction.READ, TlpAction.FETCH):
        t = Tlp()
        t.region, t.qp, t.off, t.length, t.action, t.value = ops.DATA, 0, 0, 32, action, 0
        mem.apply(t)
    assert _lazy(mem)


def test_apply_word_is_apply_and_says_whether_the_bytes_changed() -> None:
    """`apply_word` (what `Receiving.land` wakes a receiver by) writes what `apply` writes and answers 1 exactly
    where the TLP's bytes differ from those before it; -1, nothing written, for a TLP it does not take."""
    rng = random.Random(17)
    for layout in _layouts():
        mem, ref = Memory(layout), Memory(layout)
        for epoch in range(3):
            for m in (mem, ref):
                m.start_epoch(epoch)
            for _ in range(300):
                t = Tlp()
                t.region = rng.choice([ops.SIGNAL, ops.CQ, ops.RECV, ops.DATA])
                t.action = rng.choice([TlpAction.VALUE, TlpAction.ADD, TlpAction.CQE, TlpAction.COPY])
                t.length = rng.choice([8, 16, 8 if t.action != TlpAction.CQE else 16])
                size = len(ref.bufs[t.region])
                t.off = rng.randrange(-16, size + 8) if rng.random() < 0.1 else 8 * rng.randrange(max(1, size // 8))
                t.qp, t.seq, t.n = rng.randrange(1 << 20), 0, 1
                t.value = rng.choice([0, 1, -1, 1 << 63, rng.randrange(-(1 << 70), 1 << 70), rng.randrange(4)])
                before = {k: bytes(v) for k, v in mem.bufs.items()}
                got = mem.apply_word(t)
                takes = (t.length == (16 if t.action == TlpAction.CQE else 8) and t.action != TlpAction.COPY
                         and 0 <= t.off <= size - t.length)
                if not takes:
                    assert got == -1 and {k: bytes(v) for k, v in mem.bufs.items()} == before
                    continue
                ref.apply(t)
                assert mem.snapshot() == ref.snapshot()
                r = slice(t.off, t.off + t.length)
                assert got == int(before[t.region][r] != bytes(mem.bufs[t.region][r]))
