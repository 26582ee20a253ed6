"""The compiled receivers' memory reads (`epfuzz.protocols.memread.mem_u64` and friends) read a view's
`bufs` directly where it has them (`epfuzz.sim.memory.Memory`): the same values as the view's methods at
every offset, in range or not, and a view without `bufs` is read through its methods."""

from __future__ import annotations

import random

from epfuzz.protocols.memread import cq_words, mem_read, mem_u32x4, mem_u64, num_str
from tests.zoo.memviews import BufsView


class Methods:
    """A view with methods only (a backend's, a test's)."""

    def u64(self, region: str, offset: int) -> int:
        return offset + 1

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        return (offset, 1, 2, 3)

    def read(self, region: str, offset: int, length: int) -> bytes:
        return bytes([offset]) * length


def test_direct_reads_match_methods() -> None:
    rng = random.Random(31)
    view = BufsView({"r": rng.randbytes(64)})
    for offset in range(-3, 70):
        assert mem_u64(view, "r", offset) == view.u64("r", offset), offset
        assert mem_read(view, "r", offset, 5) == view.read("r", offset, 5), offset
    for offset in range(0, 49):
        assert mem_u32x4(view, "r", offset) == view.u32x4("r", offset), offset


def test_views_without_bufs_use_their_methods() -> None:
    view = Methods()
    assert mem_u64(view, "r", 7) == 8
    assert mem_u32x4(view, "r", 4) == (4, 1, 2, 3)
    assert mem_read(view, "r", 2, 3) == b"\x02\x02\x02"


def test_num_str_is_str() -> None:
    """An accept's description takes its numbers from a table: the text `str` makes, in the table or past it."""
    for i in [*range(-3, 300), 1 << 40]:
        assert num_str(i) == str(i)


def test_cq_words_read_each_entry_valid_and_immediate_word() -> None:
    """`cq_seen`'s struct reads, of each 16-byte entry, its first word (and with `imm` its second): what the
    same entries read as whole u32x4 say."""
    rng = random.Random(5)
    for n in (1, 3, 17):
        cq = bytearray(rng.randbytes(16 * n))
        whole = [mem_u32x4(BufsView({"r": bytes(cq)}), "r", 16 * e) for e in range(n)]
        assert list(cq_words(n, True).unpack(cq)) == [w for e in whole for w in e[:2]]
        assert list(cq_words(n, False).unpack(cq)) == [e[0] for e in whole]
