from __future__ import annotations

import numpy as np

from epfuzz.ir.payload import canary, classify_chunk, token_checksum_ok, token_image


def test_token_image_describes_itself():
    img = token_image(3, 0, 2, 17, 64)
    w = np.frombuffer(img, dtype="<u4").reshape(-1, 4)
    assert (w[:, 0] == 3).all() and (w[:, 2] == 17).all() and (w[:, 1] == 2).all()
    assert list(w[:-1, 3]) == [0, 1, 2]
    assert token_checksum_ok(img)


def test_checksum_catches_a_mixed_token():
    new, old = token_image(2, 0, 0, 1, 64), token_image(1, 0, 0, 1, 64)
    assert not token_checksum_ok(old[:16] + new[16:])


def test_epochs_differ_so_stale_bytes_cannot_hide():
    assert token_image(1, 0, 0, 0, 64) != token_image(2, 0, 0, 0, 64)


def test_classify():
    assert classify_chunk(canary(5, 16).tobytes(), 5) == "poisoned"
    assert classify_chunk(canary(4, 16).tobytes(), 5) == "stale-poison"
    assert classify_chunk(token_image(1, 0, 0, 0, 32)[:16], 5) == "stale"
    assert classify_chunk(token_image(9, 0, 0, 0, 32)[:16], 5) == "corrupt"


def _vectorised_reference(layout, epoch, src):  # type: ignore[no-untyped-def]
    """Every slot's words built at once and checksummed per token (expected_data before issue 31): the
    reference the per-token construction must equal."""
    import zlib

    import numpy as np

    size, tb = layout.sizes["data"], layout.token_bytes
    img = canary(epoch, size).copy()
    n = tb // 16
    nc, spc = layout.num_channels, layout.slots_per_channel
    words = np.empty((nc, spc, n, 4), dtype="<u4")
    words[..., 0] = epoch
    words[..., 1] = ((src << 16) | np.arange(nc, dtype="<u4"))[:, None, None]
    words[..., 2] = (np.arange(spc, dtype="<u4")[None, :] * nc + np.arange(nc, dtype="<u4")[:, None])[..., None]
    words[..., 3] = np.arange(n, dtype="<u4")
    slots = img.reshape(nc, spc, tb)
    for c in range(nc):
        k = layout.tokens_in_channel[c]
        for s in range(k):
            words[c, s, n - 1, 3] = zlib.crc32(words[c, s, :n - 1].tobytes())
        slots[c, :k] = words[c, :k].reshape(k, tb // 4).view(np.uint8)
    return img


def test_expected_data_equals_the_vectorised_reference() -> None:
    """`expected_data` copies cached per-token images into poison (issue 31): the same bytes as every slot's
    words built at once, on random layouts and the deep zoo's DeepEP slots; read-only."""
    import random

    from epfuzz.model import epoch as ep
    from epfuzz.protocols.base import Layout

    rng = random.Random(3)
    for _ in range(200):
        nc, spc = rng.randrange(1, 5), rng.randrange(1, 9)
        lay = Layout(nc, spc, 16 * rng.randrange(1, 20), rng.randrange(1, 4),
                     tuple(rng.randrange(0, spc + 1) for _ in range(nc)))
        e, src = rng.randrange(0, 5), rng.randrange(0, 3)
        got = ep.expected_data(lay, e, src)
        want = _vectorised_reference(lay, e, src).tobytes()
        assert got.tobytes() == want
        assert not got.flags.writeable
        # the all-at-once construction, which expected_data takes from SLOTS_AT_ONCE bytes of tokens, on all
        at_once = ep._expected_slots(nc, spc, lay.token_bytes, lay.tokens_in_channel, e, src,
                                     canary(e, nc * spc * lay.token_bytes).tobytes())
        assert at_once.tobytes() == want
        assert not at_once.flags.writeable
    for tokens in ((12, 0), (3, 7), (0, 0)):  # the deep zoo's 14,400-byte DeepEP slots
        lay = Layout(2, 12, 14400, 1, tokens)
        assert ep.expected_data(lay, 3, 1).tobytes() == _vectorised_reference(lay, 3, 1).tobytes()
    big = Layout(3, 4, 4096, 1, (4, 1, 0))  # past SLOTS_AT_ONCE, with an unused channel and unused slots
    assert sum(big.tokens_in_channel) * big.token_bytes >= ep.SLOTS_AT_ONCE
    assert ep.expected_data(big, 2, 0).tobytes() == _vectorised_reference(big, 2, 0).tobytes()


def test_classify_chunks_at_once_equals_one_by_one() -> None:
    """The oracle classifies all wrong chunks in one numpy pass (issue 14): same classes as one by one."""
    import random

    import numpy as np

    from epfuzz.ir.payload import canary, classify_chunk, classify_chunks, token_image

    rng = random.Random(5)
    rows = [canary(e, 16).tobytes() for e in range(4)] + [token_image(e, 0, 1, 2, 32)[:16] for e in range(4)]
    rows += [rng.randbytes(16) for _ in range(50)]
    words = np.frombuffer(b"".join(rows), dtype="<u4").reshape(-1, 4)
    for epoch in range(4):
        assert classify_chunks(words, epoch) == [classify_chunk(r, epoch) for r in rows]


def test_classify_words_equals_classify_chunk() -> None:
    """The oracle classifies the chunks it shows from their first and last words (issue 31): the same class
    as the chunk itself gets, for poison of this and other epochs, payload of older and newer epochs, noise."""
    import random
    import struct

    from epfuzz.ir.payload import canary, classify_chunk, classify_words, token_image

    rng = random.Random(7)
    rows = [canary(e, 16).tobytes() for e in (0, 1, 2, 3, 0x10002)] + [token_image(e, 0, 1, 2, 32)[:16]
                                                                       for e in range(5)]
    rows += [rng.randbytes(16) for _ in range(200)]
    rows += [struct.pack("<4I", 0xC0DE0000 | rng.randrange(4), 0, 0, rng.choice([0xDEADBEEF, 0xDEADBEEE]))
             for _ in range(50)]
    for epoch in (0, 1, 2, 3, 0x10002, 2**31):
        for r in rows:
            w0, _, _, w3 = struct.unpack("<4I", r)
            assert classify_words(w0, w3, epoch) == classify_chunk(r, epoch)


def test_canary_words_and_read_only() -> None:
    """Every 16-byte chunk of the poison is (tag | epoch low 16 bits, ~0, ~0, 0xDEADBEEF), little-endian u32s,
    over nbytes // 16 chunks; the array is read-only (memory copies it before writing)."""
    import numpy as np

    from epfuzz.ir.payload import CANARY_TAG

    for epoch in (0, 1, 7, 0xFFFF, 0x12345):
        for nbytes in (0, 15, 16, 48, 7184, 14400 * 3):
            img = canary(epoch, nbytes)
            assert img.dtype == np.uint8 and img.shape == (nbytes // 16 * 16,)
            assert not img.flags.writeable
            words = img.view("<u4").reshape(-1, 4)
            assert (words[:, 0] == (CANARY_TAG | (epoch & 0xFFFF))).all()
            assert (words[:, 1] == 0xFFFFFFFF).all() and (words[:, 2] == 0xFFFFFFFF).all()
            assert (words[:, 3] == 0xDEADBEEF).all()


def test_token_image_joined_equals_numpy_construction() -> None:
    """`token_image` joins the chunks' index words of tokens up to 2 KiB and adds a ramp of them to the
    repeated prefix past that (issue 31): the same bytes as the column-by-column numpy construction it keeps
    for out-of-range words, at every size around the switch, for random words and sizes that grow and shrink
    the ramp, and the same errors for words past 32 bits and a negative size."""
    import random

    import pytest

    from epfuzz.ir import payload as pl

    make = pl.token_image.__wrapped__  # around the cache: every call builds
    rng = random.Random(31)
    sizes = [0, 8, 16, 24, 32, 48, 2032, 2048, 2064, 2080, 4096, 4112, 14400, 40000, 2064]
    sizes += [rng.randrange(0, 20000) for _ in range(60)]
    for tb in sizes:
        e, src, c, tok = rng.randrange(0, 9), rng.randrange(0, 4), rng.randrange(0, 8), rng.randrange(0, 500)
        assert make(e, src, c, tok, tb) == pl._token_image_numpy(e, src, c, tok, tb), tb
    for words in ((0xFFFFFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF), (0, 0, 0, 0)):
        assert make(*words, 64) == pl._token_image_numpy(*words, 64)
    for words in ((7, 0x10000, 3, 5), (1 << 32, 0, 0, 0)):  # a word past u32: numpy's error, both ways
        with pytest.raises(OverflowError):
            pl._token_image_numpy(*words, 64)
        with pytest.raises(OverflowError):
            make(*words, 64)
    with pytest.raises(ValueError):
        make(1, 0, 0, 0, -32)


def test_expected_data_of_layouts_that_do_not_join() -> None:
    """A layout whose slots cannot be joined to its region (issue 31) gets what the token-by-token copies
    give: an error for a token size that is not a multiple of 16 bytes, the overflowing channel's tokens over
    the next channel's slots, and an error past the region; a well-formed layout joins to the same bytes."""
    import pytest

    from epfuzz.ir.payload import canary_bytes
    from epfuzz.model import epoch as ep
    from epfuzz.protocols.base import Layout

    with pytest.raises(ValueError):
        ep.expected_data(Layout(2, 2, 24, 1, (1, 0)), 1)
    over = Layout(2, 2, 32, 1, (3, 0))  # channel 0 says 3 tokens in 2 slots: the third lands in channel 1's
    got = ep.expected_data(over, 2)
    assert got.tobytes() == ep._expected_by_copies(over, 2, 0, canary_bytes(2, 128)).tobytes()
    assert got.tobytes()[64:96] == token_image(2, 0, 0, 4, 32) and not got.flags.writeable
    with pytest.raises(ValueError):
        ep.expected_data(Layout(2, 2, 32, 1, (0, 3)), 2)
    fine = Layout(3, 4, 48, 1, (4, 0, 2))
    assert ep.expected_data(fine, 5).tobytes() == ep._expected_by_copies(fine, 5, 0, canary_bytes(5, 576)).tobytes()


def test_trailer_crc_is_zlibs_crc32_whichever_library_computes_it() -> None:
    """`payload.crc32` (ISA-L's with the `core` extra, issue 31) is zlib's CRC-32 on bytes, bytearrays,
    memoryviews and numpy arrays of every length, and it is ISA-L's wherever `isal` imports (else the speed-up
    is lost without a word)."""
    import importlib.util
    import random
    import zlib

    from epfuzz.ir import payload

    rng = random.Random(7)
    for n in [0, 1, 15, 16, 17, 255, 2048, 4099, 70000] + [rng.randrange(1, 5000) for _ in range(30)]:
        data = rng.randbytes(n)
        want = zlib.crc32(data)
        assert payload.crc32(data) == want
        assert payload.crc32(bytearray(data)) == want
        assert payload.crc32(memoryview(data)) == want
        if n % 4 == 0:
            assert payload.crc32(np.frombuffer(data, dtype="<u4")) == want
    if importlib.util.find_spec("isal") is not None:
        from isal import isal_zlib

        assert payload.crc32 is isal_zlib.crc32


def test_canary_view_is_canary_bytes() -> None:
    """`canary_view` (a prefix of one growing canary per epoch) holds `canary_bytes`' bytes at every size, in any
    order of sizes and epochs, past its epoch bound and for epochs that share their low 16 bits."""
    import random

    from epfuzz.ir.payload import canary_bytes, canary_view

    rng = random.Random(5)
    for _ in range(400):
        epoch = rng.choice([rng.randrange(0, 40), 0x10000 + rng.randrange(0, 3)])
        nbytes = rng.choice([0, 15, 16, 17, rng.randrange(0, 5000), rng.randrange(0, 200_000)])
        assert bytes(canary_view(epoch, nbytes)) == canary_bytes(epoch, nbytes), (epoch, nbytes)


def test_expected_later_is_expected_data_of_the_later_epoch() -> None:
    """`expected_later` makes a later epoch's image from an earlier one's by two strided xors (issue 31): the
    same bytes as `expected_data` of that epoch, on random layouts past `SLOTS_AT_ONCE` (unused slots and
    channels, one-chunk tokens, tokens over 2 KiB) and epoch pairs, read-only; None below it and past 2^16."""
    import random

    from epfuzz.model import epoch as ep
    from epfuzz.protocols.base import Layout

    rng = random.Random(5)
    checked = 0
    for _ in range(300):
        nc, spc = rng.randrange(1, 5), rng.randrange(1, 9)
        lay = Layout(nc, spc, 16 * rng.choice([1, 2, 5, 17, 40, 150, 300]), 1,
                     tuple(rng.randrange(0, spc + 1) for _ in range(nc)))
        e = rng.randrange(0, 6) if rng.randrange(4) else rng.randrange(0, 1 << 16)
        later = rng.randrange(0, 1 << 16) if rng.randrange(5) == 0 else e + rng.randrange(1, 4)
        got = ep.expected_later(ep.expected_data(lay, e), lay, e, later)
        if sum(lay.tokens_in_channel) * lay.token_bytes < ep.SLOTS_AT_ONCE or later > 0xFFFF:
            assert got is None
            continue
        assert got is not None and not got.flags.writeable
        assert got.tobytes() == ep.expected_data(lay, later).tobytes() == _vectorised_reference(lay, later, 0).tobytes()
        checked += 1
    assert checked > 50
    big = Layout(2, 4, 4096, 1, (4, 2))
    assert ep.expected_later(ep.expected_data(big, 70000), big, 70000, 70001) is None  # the canary's 16 bits


def test_expected_range_is_a_slice_of_expected_data() -> None:
    """`expected_range` makes only the slots a range touches (a stale accept's judge, issue 31): the very bytes of
    `expected_data`'s slice, on random layouts (unused slots and channels, small and past `SLOTS_AT_ONCE`) and
    random ranges, aligned or not; None for an empty range, one past the region, a region of another size and a
    layout whose image is not whole slots."""
    import random

    from epfuzz.model import epoch as ep
    from epfuzz.protocols.base import Layout

    rng = random.Random(11)
    for _ in range(300):
        nc, spc = rng.randrange(1, 5), rng.randrange(1, 9)
        lay = Layout(nc, spc, 16 * rng.choice([1, 2, 5, 17, 40, 150, 300]), 1,
                     tuple(rng.randrange(0, spc + 1) for _ in range(nc)))
        e = rng.randrange(0, 6) if rng.randrange(4) else rng.randrange(0, 1 << 16)
        whole = ep.expected_data(lay, e).tobytes()
        size = len(whole)
        for _ in range(5):
            if rng.randrange(2):
                tb = lay.token_bytes
                off, n = tb * rng.randrange(nc * spc), tb * rng.randrange(1, 3)
                n = min(n, size - off)
            else:
                off = rng.randrange(size)
                n = rng.randrange(1, size - off + 1)
            assert ep.expected_range(lay, e, off, n, size) == whole[off:off + n]
        assert ep.expected_range(lay, e, 0, 0, size) is None
        assert ep.expected_range(lay, e, size - 16, 32, size) is None
        assert ep.expected_range(lay, e, 0, 16, size + 16) is None
    assert ep.expected_range(Layout(1, 2, 24, 1, (1,)), 0, 0, 16, 48) is None  # 24-byte tokens: not whole chunks
    assert ep.expected_range(Layout(1, 2, 32, 1, (3,)), 0, 0, 16, 64) is None  # more tokens than slots
