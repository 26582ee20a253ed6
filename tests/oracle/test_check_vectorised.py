"""The oracle's stale-accept details, computed with few numpy calls (issue 31), against a chunk-by-chunk
reference: wrong bytes, wrong chunks and their classes (`classify_chunk` one at a time), and tokens, for
accepts of whole slots (the per-slot path) and of ranges that are not (the general path)."""

from __future__ import annotations

import random

import numpy as np

from epfuzz.ir.payload import CHUNK, canary, classify_chunk, token_image
from epfuzz.model.oracle import MAX_REPORTED_CHUNKS, check
from epfuzz.protocols.base import Consume, Layout


def _reference(c: Consume, actual: np.ndarray, expected: np.ndarray, lay: Layout, epoch: int) -> tuple:
    a = actual[c.offset:c.offset + c.length].tobytes()
    e = expected[c.offset:c.offset + c.length].tobytes()
    bad = [i for i in range(0, len(a), CHUNK) if a[i:i + CHUNK] != e[i:i + CHUNK]]
    chunks = [(c.offset + i, classify_chunk(a[i:i + CHUNK], epoch)) for i in bad[:MAX_REPORTED_CHUNKS]]
    slots = sorted({(c.offset + i) // lay.token_bytes for i in bad})
    tokens = sorted(lay.token_of(s // lay.slots_per_channel, s % lay.slots_per_channel) for s in slots)
    return sum(x != y for x, y in zip(a, e)), len(bad), chunks, tokens


def test_details_match_a_chunk_by_chunk_reference() -> None:
    rng = random.Random(5)
    lay = Layout(2, 4, 64, 4, (4, 3))
    size = 2 * 4 * 64
    epoch = 3
    expected = np.frombuffer(b"".join(token_image(epoch, 0, 0, k, 64) for k in range(8)), dtype=np.uint8)
    older = b"".join(token_image(epoch - 1, 0, 0, k, 64) for k in range(8))
    fills = [canary(epoch, size).tobytes(), canary(epoch - 1, size).tobytes(), older,
             bytes(rng.randrange(256) for _ in range(size))]
    seen = 0
    for _ in range(300):
        actual = bytearray(expected.tobytes())
        for _ in range(rng.randrange(1, 6)):  # some chunks from a wrong image, some single bytes flipped
            i = rng.randrange(size // CHUNK) * CHUNK
            actual[i:i + CHUNK] = rng.choice(fills)[i:i + CHUNK]
            if rng.random() < 0.3:
                actual[i + rng.randrange(CHUNK)] ^= 1
        arr = np.frombuffer(bytes(actual), dtype=np.uint8)
        if rng.random() < 0.5:  # whole slots
            first = rng.randrange(8)
            c = Consume("data", first * 64, rng.randint(1, 8 - first) * 64, 0, "slots")
        else:  # whole chunks, not whole slots
            first = rng.randrange(size // CHUNK)
            c = Consume("data", first * CHUNK, rng.randint(1, size // CHUNK - first) * CHUNK, 0, "chunks")
        v = check(c, arr, expected, lay, "p", epoch)
        want = _reference(c, arr, expected, lay, epoch)
        if v is None:
            assert want[1] == 0
            continue
        seen += 1
        assert (v.bad_bytes, v.stale_chunks, v.bad_chunks, v.tokens) == want
    assert seen > 100
