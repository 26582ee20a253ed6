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


def test_expected_data_built_at_once_equals_per_token_images() -> None:
    """`expected_data` builds every slot at once (issue 14): the same bytes as one `token_image` per slot."""
    import random

    from epfuzz.model import epoch as ep
    from epfuzz.protocols.base import Layout

    rng = random.Random(3)
    for _ in range(200):
        nc, spc = rng.randrange(1, 5), rng.randrange(1, 9)
        lay = Layout(nc, spc, 16 * rng.randrange(1, 20), rng.randrange(1, 4),
                     tuple(rng.randrange(0, spc + 1) for _ in range(nc)))
        e, src = rng.randrange(0, 5), rng.randrange(0, 3)
        slow = ep._expected_per_token(lay, e, src, ep.canary(e, lay.sizes["data"]).copy())
        assert ep.expected_data(lay, e, src).tobytes() == slow.tobytes()


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
