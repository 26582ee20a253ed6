"""A stale accept on a lazy data region judged from where its base differs from the expected image
(`epfuzz.sim.stalediff`, issue 31): the very verdict `check_bytes` gives the range's bytes, for covered ranges of
any alignment (spans that start or end inside a chunk, two spans sharing one), and a memory gives a range its
`RangeDiff` only from its second stale accept in the configuration."""

from __future__ import annotations

import random

from epfuzz.ir import ops
from epfuzz.ir.payload import canary, token_image
from epfuzz.model.oracle import check_bytes
from epfuzz.protocols.base import Consume, Layout
from epfuzz.sim.memory import Memory, Starts
from epfuzz.sim.packets import Tlp, TlpAction
from epfuzz.sim.stalediff import RangeDiff
from tests.sim.test_memory_lazy import _layouts


def _ranges(rng: random.Random, size: int) -> tuple[list[int], list[int]]:
    """Sorted, disjoint, not touching [lo, hi) ranges in [0, size), at any byte."""
    pts = sorted(rng.sample(range(size + 1), 2 * rng.randrange(0, 7)))
    return pts[0::2], pts[1::2]


def test_range_diff_judges_as_check_bytes() -> None:
    rng = random.Random(11)
    lay = Layout(2, 4, 64, 4, (4, 3))
    size, epoch = 2 * 4 * 64, 3
    img = b"".join(token_image(epoch, 0, 0, k, 64) for k in range(8))
    near = bytearray(img)
    for _ in range(6):  # a base equal to the image but for a few bytes: wrong chunks alone, partial spans clean
        near[rng.randrange(size)] ^= 1 << rng.randrange(8)
    fills = [canary(epoch, size).tobytes(), bytes(size), bytes(near),
             b"".join(token_image(epoch - 1, 0, 0, k, 64) for k in range(8)),
             bytes(rng.randrange(256) for _ in range(size))]
    seen = none = 0
    for _ in range(1500):
        fill = rng.choice(fills)
        first = rng.randrange(8)
        off, n = first * 64, rng.randint(1, 8 - first) * 64
        lo, hi = _ranges(rng, size)
        actual = bytearray(fill)
        for a, b in zip(lo, hi):
            actual[a:b] = img[a:b]
        c = Consume(ops.DATA, off, n, 1, "slots")
        want = check_bytes(c, bytes(actual[off:off + n]), img[off:off + n], lay, "p", epoch)
        got = RangeDiff(fill[off:off + n], img[off:off + n], off, epoch).judge(c, lo, hi, off, lay, "p", epoch)
        if want is None:
            none += 1
            assert got is None
            continue
        seen += 1
        assert got is not None and got.to_dict() == want.to_dict() and got.summary() == want.summary()
    assert seen > 500 and none > 50


def test_a_memory_judges_a_range_from_its_second_stale_accept() -> None:
    rng = random.Random(29)
    judged = 0
    for layout in _layouts():
        tb = layout.token_bytes
        starts = Starts()
        for _ in range(30):
            mem = Memory(layout, starts)
            size = mem.data_len
            epoch = rng.randrange(3)
            mem.start_epoch(epoch, True, True)
            for _ in range(rng.randrange(0, 6)):
                t = Tlp()
                t.region, t.qp, t.action, t.value = ops.DATA, 0, TlpAction.COPY, 0
                t.length = rng.randrange(1, min(size, 600) + 1)
                t.off = rng.randrange(0, size - t.length + 1)
                mem.apply(t)
            slots = size // tb
            first = rng.randrange(min(slots, 2))
            off, n = first * tb, rng.randint(1, min(slots - first, 2)) * tb
            c = Consume(ops.DATA, off, n, 0, "slots")
            got = mem.lazy_range(off, n)
            assert got is not None
            want = check_bytes(c, got[0], got[1], layout, "p", epoch)
            key = (epoch, epoch, off, n)
            asked = key in starts.diffs
            done, v = mem.judge_range(c, off, n, "p")
            assert done == asked  # the range's first ask is judged as before, and noted
            if done:
                assert (v is None) == (want is None) and (v is None or v.to_dict() == want.to_dict())
                judged += v is not None
            assert key in starts.diffs
    assert judged > 20


def test_a_configurations_range_diffs_stay_within_their_byte_bound() -> None:
    """Each `RangeDiff` holds ~11 times its range's bytes and the form cache keeps 128 configurations: a bound
    on the count alone let 64 ranges of 16 KiB slots each reach ~1.4 GiB a process (the review of 2026-12-05)."""
    from epfuzz.sim.stalediff import DIFF_BYTES_MAX, range_diff

    rng = random.Random(5)
    layout = Layout(4, 8, 4096, 4, (8, 8, 8, 8))  # 4 KiB slots, 128 KiB of data
    size = 4 * 8 * 4096
    starts = Starts()
    made = 0
    for _ in range(400):
        slots = rng.randint(1, 20)
        off = rng.randrange(0, 32 - slots + 1) * 4096
        epoch = rng.randrange(2)
        for _ in range(2):  # the second ask makes it
            got = range_diff(starts, layout, epoch, -1, off, slots * 4096, size, None)
            if got is not None:
                made += 1
                assert slots * 4096 <= DIFF_BYTES_MAX
        held = [k[3] for k, v in starts.diffs.items() if isinstance(v, RangeDiff)]
        assert sum(held) == starts.diff_bytes <= DIFF_BYTES_MAX
    assert made > 0
