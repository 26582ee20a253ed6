"""Self-describing payloads and poison, so stale bytes cannot hide.

DeepEP's own tests send the same tensor every call into slots that are never
poisoned, so a slot still holding last call's bytes compares equal and the race
is invisible. Here every 16-byte chunk names its epoch, source rank, channel,
token and chunk index, the last chunk of a token (where DeepEP keeps topk_idx) is
a trailer with a CRC32 of the rest, and slots are filled with a per-epoch canary
before each epoch. Any byte the receiver consumes that is not this epoch's payload
is therefore detected, and classified.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final

import numpy as np

CHUNK: Final = 16  # Final: compiled code reads them as constants, not from the module dict
CANARY_TAG: Final = 0xC0DE0000
TRAILER_TAG = 0x7A110000
_CANARY: Final = struct.Struct("<4I")


def pad16(n: int) -> int:
    return (n + 15) & ~15


_JOINED_MAX: Final = 2048  # bytes: past this one numpy add over the token costs fewer instructions than the join
_U32: Final = 0xFFFFFFFF
_HEAD: Final = struct.Struct("<3I")
_U32LE: Final = struct.Struct("<I")
_TRAILER: Final = struct.Struct("<4I")
#: b"" and the little-endian index words 0, 1, ...: a joined token of n chunks is separated by the first n
#: (made here, not on first use: 128 words, and no miss path for atheris coverage to depend on)
_INDEX_WORDS: Final = [b""] + [_U32LE.pack(i) for i in range(_JOINED_MAX // CHUNK - 1)]
#: [words]: u32 words of chunks that hold their index in the last word and 0 in the others, for at least as
#: many chunks as the largest token `_token_image_wide` built so far (grown by doubling: at most twice that
#: token's bytes, ~33 KB after the random dispatch_any inputs, whose largest token is ~16.5 KB)
_RAMP: Final[list[np.ndarray]] = [np.zeros(0, dtype="<u4")]


def _pick_crc32() -> Callable[[Any], int]:
    """ISA-L's CRC-32 where the `isal` package (the `core` extra) is installed, else zlib's: the same function
    (CRC-32/ISO-HDLC), which ISA-L computes with carry-less multiplies, 6-15x faster than zlib's from 2 KiB
    (a fresh scenario's expected images spent ~40% of their instructions in zlib's, issue 31)."""
    try:
        from isal import isal_zlib
    except ImportError:  # pragma: no cover - installed without the extra
        return zlib.crc32
    fast: Callable[[Any], int] = isal_zlib.crc32
    return fast


#: the trailer's CRC-32 (`_pick_crc32`); `_token_image_numpy`, the reference, keeps zlib's, so the tests hold
#: the two to the same values
crc32: Final = _pick_crc32()


@lru_cache(maxsize=1024)  # the expected images are made of these: a guided search reuses (epoch, token) often
def token_image(epoch: int, src: int, channel: int, token: int, token_bytes: int) -> bytes:
    """The exact bytes of one token in one epoch.

    Chunk i is (epoch, src << 16 | channel, token, i), the last one a trailer with the CRC32 of the rest in
    place of i. A token of up to `_JOINED_MAX` bytes is one `bytes.join` of the chunk index words with the
    12 bytes every chunk shares as the separator (a C loop of small copies): a fresh scenario's tokens
    miss the cache, and the numpy construction cost ~2.5 us each at a few hundred bytes, mostly fixed
    overhead (issue 31: 8% of a fresh `dispatch_any` scenario). A larger token is one numpy add of its
    repeated prefix and a ramp of index words (`_token_image_wide`): at 4 KiB it costs 42k instructions
    where the join cost 50k and the column-by-column construction 54k, at 16 KiB 107k where they cost 203k
    and 178k (callgrind, compiled core; the CRC is the same in each). Values that do not fit a u32 word
    keep the column construction (`_token_image_numpy`, numpy's error); tests/oracle/test_payload.py holds
    the three to the same bytes."""
    n = token_bytes // CHUNK
    sc = (src << 16) | channel
    if not (n >= 0 and 0 <= epoch <= _U32 and 0 <= sc <= _U32 and 0 <= token <= _U32):
        return _token_image_numpy(epoch, src, channel, token, token_bytes)
    if n > _JOINED_MAX // CHUNK:
        return _token_image_wide(epoch, sc, token, n)
    head = _HEAD.pack(epoch, sc, token).join(_INDEX_WORDS[:n])  # b"" + (prefix + index) per chunk but the last
    return head + _TRAILER.pack(epoch, sc, token, crc32(head))


def index_ramp(n: int) -> np.ndarray:
    """u32 words of n chunks that hold their index in the last word and 0 in the others (a read-only view of
    `_RAMP`): what a chunk prefix (epoch, sc, token, 0) repeated n times is added to."""
    ramp = _RAMP[0]
    if len(ramp) < 4 * n:
        m = max(n, len(ramp) // 2)  # doubling: a run of growing tokens rebuilds it a few times, not per token
        ramp = np.zeros(4 * m, dtype="<u4")
        ramp[3::4] = np.arange(m, dtype="<u4")
        ramp.flags.writeable = False  # shared by every token image made after it: no caller may write it
        _RAMP[0] = ramp
    return ramp[:4 * n]


def _token_image_wide(epoch: int, sc: int, token: int, n: int) -> bytes:
    """`token_image` of n >= 1 chunks in one pass: the chunk prefix (epoch, sc, token, 0) repeated by bytes
    multiplication plus the ramp of index words (no carry: each word is 0 in one of the two), then the
    trailer's CRC in place of the last index word."""
    words = np.frombuffer(_TRAILER.pack(epoch, sc, token, 0) * n, dtype="<u4") + index_ramp(n)
    words[4 * n - 1] = crc32(words[:4 * n - 4])
    return words.tobytes()


def _token_image_numpy(epoch: int, src: int, channel: int, token: int, token_bytes: int) -> bytes:
    """`token_image` built with numpy column by column, then the trailer: the reference the faster
    constructions are tested against, and the one that raises for a word past 32 bits."""
    n = token_bytes // CHUNK
    words = np.empty((n, 4), dtype="<u4")
    words[:, 0] = epoch
    words[:, 1] = (src << 16) | channel
    words[:, 2] = token
    words[:, 3] = np.arange(n, dtype="<u4")
    body = words.tobytes()
    crc = zlib.crc32(body[:-CHUNK])
    trailer = np.array([epoch, (src << 16) | channel, token, 0], dtype="<u4")
    trailer[3] = crc
    return body[:-CHUNK] + trailer.tobytes()


def canary(epoch: int, nbytes: int) -> np.ndarray:
    """Poison for epoch `epoch`: recognisably not payload, and different each epoch (read-only).

    One 16-byte chunk repeated by bytes multiplication (a single C loop) and viewed, not filled column by
    column: four numpy assignments cost more than the rest of it at the sizes a scenario has, and a fresh
    scenario makes two of these (issue 31). Its bytes come from `canary_bytes`' cache. This module's caches
    (and `expected_data`'s) have lines that run only on a miss: accepted because no harness line-instruments
    epfuzz (`epfuzz.continuous.harness`: libFuzzer's coverage is the search's semantic features, the same
    whatever ran before); line coverage of the pure path (`--feedback lines`) does see them.
    """
    return np.frombuffer(canary_bytes(epoch, nbytes), dtype=np.uint8)  # over bytes: read-only


@lru_cache(maxsize=64)
def canary_bytes(epoch: int, nbytes: int) -> bytes:
    """`canary` as bytes. Cached: every new layout's epoch-start and expected images begin with one, and
    a guided search on the deep zoo makes ~100 distinct (epoch, size) pairs per 1,200 steps, each a copy of
    ~140 KB on average (1.4% of a step; 64 entries of that size are ~9 MB)."""
    return _CANARY.pack(CANARY_TAG | (epoch & 0xFFFF), 0xFFFFFFFF, 0xFFFFFFFF, 0xDEADBEEF) * (nbytes // CHUNK)


#: per epoch's low 16 bits (all of the canary that depends on the epoch), the longest canary `canary_view` made so far
_POISON: Final[dict[int, bytes]] = {}
_POISON_EPOCHS: Final = 16  # kept at once (emptied past it): a run's epochs and its neighbours'


def canary_view(epoch: int, nbytes: int) -> memoryview:
    """`canary_bytes(epoch, nbytes)` as a view of the longest canary of the epoch made so far (the canary is
    16-periodic: a shorter one is its prefix), made anew only to grow it, to twice the length asked at least.
    `canary_bytes`' cache holds one canary per (epoch, size), and a fresh configuration's region size is mostly
    new: each missed it and repeated its chunk over the region, ~1.5% of a fresh `dispatch_any` scenario's
    instructions (issue 31)."""
    key = epoch & 0xFFFF
    n = nbytes // CHUNK
    have = _POISON.get(key)
    if have is None or len(have) < n * CHUNK:
        if have is None and len(_POISON) >= _POISON_EPOCHS:
            _POISON.clear()
        grown = max(n, 2 * len(have) // CHUNK if have is not None else 0)
        have = _POISON[key] = _CANARY.pack(CANARY_TAG | key, 0xFFFFFFFF, 0xFFFFFFFF, 0xDEADBEEF) * grown
    return memoryview(have)[:n * CHUNK]


def classify_chunk(chunk: bytes, epoch: int) -> str:
    """What a wrong 16-byte chunk holds: poison, an older epoch's payload, or garbage."""
    w = np.frombuffer(chunk, dtype="<u4")
    return classify_words(int(w[0]), int(w[3]), epoch)


_CLASSES = ("stale", "corrupt", "stale-poison", "poisoned")


def classify_words(w0: int, w3: int, epoch: int) -> str:
    """`classify_chunk` of a chunk given its first and last little-endian u32 words (all it reads): the
    oracle classifies the few chunks it shows in plain ints, not an array pass per class (issue 31)."""
    if w3 == 0xDEADBEEF and (w0 & 0xFFFF0000) == CANARY_TAG:
        return "poisoned" if (w0 & 0xFFFF) == (epoch & 0xFFFF) else "stale-poison"
    return "stale" if w0 < epoch else "corrupt"


def classify_chunks(words: np.ndarray, epoch: int) -> list[str]:
    """`classify_chunk` of each row of `words` (k x 4 little-endian u32), all at once."""
    w0 = words[:, 0].astype(np.int64)
    canary = (words[:, 3] == 0xDEADBEEF) & ((w0 & 0xFFFF0000) == CANARY_TAG)
    code = (w0 >= epoch).astype(np.int8)  # 0 stale, 1 corrupt, 2 stale-poison, 3 poisoned: no object array
    code[canary] = 2
    code[canary & ((w0 & 0xFFFF) == (epoch & 0xFFFF))] = 3
    classes: list[str] = [_CLASSES[k] for k in code.tolist()]
    return classes


def token_checksum_ok(token: bytes) -> bool:
    tail = np.frombuffer(token[-CHUNK:], dtype="<u4")
    return crc32(token[:-CHUNK]) == int(tail[3])
