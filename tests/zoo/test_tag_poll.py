"""The in-band tag receiver reads every slot's tag from a view's `bufs` in one struct call per poll (issue 31): it
accepts, poll after poll, what the same receiver accepts reading each tag through the view's methods, for random
layouts and tags (this epoch's, a stale one, the wrong token, one whose low bytes are this epoch's), tag words written
a slot at a time, with and without the checksum, across restores of an earlier state."""

from __future__ import annotations

import random
import struct
import zlib

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols.base import Consume, Layout
from epfuzz.protocols.inband_tag import TagReceiver
from tests.zoo.memviews import BufsView


class Methods:
    """The same bytes behind the methods only (no `bufs`): the receiver reads each tag through `u32x4`."""

    def __init__(self, view: BufsView) -> None:
        self.view = view

    def u64(self, region: str, offset: int) -> int:
        return self.view.u64(region, offset)

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        return self.view.u32x4(region, offset)

    def read(self, region: str, offset: int, length: int) -> bytes:
        return self.view.read(region, offset, length)


def _key(got: list[Consume]) -> list[tuple[object, ...]]:
    return [(c.region, c.offset, c.length, c.channel, c.what, c.invalidate) for c in got]


def test_tags_read_from_bufs_accept_what_tags_read_through_methods() -> None:
    rng = random.Random(3)
    for _ in range(300):
        nch, tb = rng.randint(1, 8), 16 * rng.randint(1, 12)
        per = tuple(rng.randint(0, 6) for _ in range(nch))
        spc = max(1, max(per))
        lay = Layout(nch, spc, tb, 2, per)
        view = BufsView({ops.DATA: bytes(nch * spc * tb)})
        scn = codec.decode(b"", "inband_tag")
        checksum = rng.random() < 0.25  # the fix's receiver: a tag seen, then the token's CRC
        fast, slow = TagReceiver(scn, lay, checksum), TagReceiver(scn, lay, checksum)
        epoch = rng.randint(0, 3)
        fast.start_epoch(epoch)
        slow.start_epoch(epoch)
        saved = fast.state()
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.15:  # back to an earlier state (the emulator's state merging restores receivers)
                fast.restore(saved)
                slow.restore(saved)
            elif rng.random() < 0.3:
                saved = fast.state()
            c = rng.randrange(nch)
            i = rng.randrange(spc)
            word0 = rng.choice([epoch, epoch, epoch + 1, 0xC0DE0000, epoch + 0x100])
            word2 = rng.choice([i * nch + c, i * nch + c, rng.randrange(64), i * nch + c + 0x100])
            struct.pack_into("<4I", view.bufs[ops.DATA], (c * spc + i) * tb + tb - 16, word0, 7, word2, 9)
            assert _key(fast.poll(view, epoch)) == _key(slow.poll(Methods(view), epoch))
            assert fast.state() == slow.state()


def test_poll_changed_accepts_what_a_whole_poll_accepts() -> None:
    """`TagReceiver.poll_changed` looks only at the slots with a byte in the span it is told changed since its last
    poll (the emulator's `Receiving` tells it): poll after poll, across restores of an earlier state (with the span
    saved beside it, as `Receiving.state` keeps it), it accepts what a whole `poll` of the same receiver accepts,
    for tags and tokens written whole or in part (a token's CRC right or wrong), with and without the checksum. A
    receiver that reads the tag a slot early or late, or drops a slot of the span's edge, fails it."""
    rng = random.Random(7)
    for _ in range(300):
        nch, tb = rng.randint(1, 6), 16 * rng.randint(1, 8)
        per = tuple(rng.randint(0, 5) for _ in range(nch))
        spc = max(1, max(per))
        lay = Layout(nch, spc, tb, 2, per)
        view = BufsView({ops.DATA: bytes(nch * spc * tb)})
        data = view.bufs[ops.DATA]
        checksum = rng.random() < 0.3
        told, whole = TagReceiver(codec.decode(b"", "inband_tag"), lay, checksum), TagReceiver(
            codec.decode(b"", "inband_tag"), lay, checksum)
        epoch = rng.randint(0, 3)
        told.start_epoch(epoch)
        whole.start_epoch(epoch)
        lo, hi = 0, 1 << 60  # an epoch's start: anything may have changed
        saved = (told.state(), lo, hi, bytes(data))
        for _ in range(rng.randint(1, 16)):
            if rng.random() < 0.15:
                st, lo, hi, mem = saved
                told.restore(st)
                whole.restore(st)
                data[:] = mem
            elif rng.random() < 0.3:
                saved = (told.state(), lo, hi, bytes(data))
            for _ in range(rng.choice([0, 1, 1, 2])):
                off, n = _write(rng, data, nch, spc, tb, epoch)
                lo, hi = min(lo, off), max(hi, off + n)
            got = told.poll_changed(view, epoch, lo, hi)
            assert _key(got) == _key(whole.poll(view, epoch))
            assert told.state() == whole.state()
            lo, hi = 1 << 60, 0  # nothing changed since this poll


def _write(rng: random.Random, data: bytearray, nch: int, spc: int, tb: int, epoch: int) -> tuple[int, int]:
    """A random write into the slots (a tag, a whole token with its CRC right or wrong, some bytes): its span."""
    c, i = rng.randrange(nch), rng.randrange(spc)
    off = (c * spc + i) * tb
    tag = (rng.choice([epoch, epoch, epoch + 1]), rng.choice([i * nch + c, i * nch + c, i * nch + c + 1]))
    kind = rng.random()
    if kind < 0.4:
        struct.pack_into("<4I", data, off + tb - 16, tag[0], 7, tag[1], 9)
        return off + tb - 16, 16
    if kind < 0.8:
        body = rng.randbytes(tb - 16)
        crc = zlib.crc32(body) if rng.random() < 0.7 else 1
        data[off:off + tb] = body + struct.pack("<4I", tag[0], 7, tag[1], crc)
        return off, tb
    start = rng.randrange(len(data))
    n = rng.randint(1, min(3 * tb, len(data) - start))
    data[start:start + n] = rng.randbytes(n)
    return start, n
