"""What every backend does at an epoch's start, and the image the epoch should leave.

The sim memory and the verbs runner both poison the data slots and zero the
signal words, CQ and receive rings before an epoch; writing that once here keeps
the two backends meaning the same thing by "epoch start".
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Final

import numpy as np

from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK, canary_view, crc32, index_ramp, token_image
from epfuzz.protocols.base import Layout

#: regions the receiver zeroes before an epoch (behind the epoch barrier)
RESET_REGIONS: Final = (ops.SIGNAL, ops.CQ, ops.RECV)
_U32: Final = 0xFFFFFFFF
_PREFIX: Final = struct.Struct("<4I")  # a chunk's words: epoch, src << 16 | channel, token, index
_CRC_WORD: Final = struct.Struct("<I")
_WORD: Final = np.dtype("<u4")
#: bytes of used slots from which `expected_data` makes them all at once (`_expected_slots`)
SLOTS_AT_ONCE: Final = 4096
_CHUNK16: Final = np.dtype("V16")  # a chunk as one item: copied 16 bytes a store


def joins(layout: Layout) -> bool:
    """Does `expected_data` join this layout's region from token images: a token size a positive multiple of 16
    bytes, and no channel with more tokens than slots? Where not it copies token by token, which raises where
    the sizes disagree (a plug-in's layout: `Memory` makes such a layout's image at once, so that it raises
    whether or not a run reads the data region)."""
    tb, nc, spc, per = layout.token_bytes, layout.num_channels, layout.slots_per_channel, layout.tokens_in_channel
    return not (tb <= 0 or tb % CHUNK or len(per) < nc or any(not 0 <= k <= spc for k in per[:nc]))


@lru_cache(maxsize=256)
def expected_data(layout: Layout, epoch: int, src: int = 0) -> np.ndarray:
    """This epoch's data region as the sender means it (unused slots hold poison, read-only).

    One `bytes.join` of each channel's used slots' `token_image`s and a slice of the poison for the rest: the
    region written once. Poison copied into a bytearray, then each token copied over it through a slice,
    wrote the used slots twice and cost a slice object and an assignment per token (issue 31). The images
    come from that function's cache: a guided search's fresh configurations keep making layouts this cache
    has not seen (one per epoch), but of slots whose (epoch, channel, token, size) it has. From
    `SLOTS_AT_ONCE` bytes of tokens the used slots are made all at once (`_expected_slots`): a token's join
    costs ~50 instructions a 16-byte chunk, that construction's few numpy calls a fixed ~10 us, which
    only a larger region repays. A layout this cannot join to the region's size (a token size not a positive
    multiple of 16 bytes, or more tokens in a channel than it has slots) is copied token by token as
    before, which raises where the sizes disagree; one whose words do not fit u32 is made of `token_image`s
    (numpy's error). tests/oracle/test_payload.py holds it to the vectorised construction on random layouts.
    """
    size, tb = layout.sizes[ops.DATA], layout.token_bytes
    nc, spc = layout.num_channels, layout.slots_per_channel
    per = layout.tokens_in_channel
    poison = canary_view(epoch, size)  # a view of the same canary as the epoch-start image's
    if not joins(layout):
        return _expected_by_copies(layout, epoch, src, poison)
    if (sum(per[:nc]) * tb >= SLOTS_AT_ONCE and 0 <= epoch <= _U32 and src >= 0 and (src << 16) + nc <= _U32
            and nc * spc <= _U32):
        return _expected_slots(nc, spc, tb, per, epoch, src, poison)
    rest = memoryview(poison)  # the poison is 16-periodic and every slot 16-aligned: any slice of it will do
    parts: list[bytes | memoryview] = []
    for c in range(nc):
        k = per[c]
        for s in range(k):
            parts.append(token_image(epoch, src, c, s * nc + c, tb))
        if k < spc:
            parts.append(rest[:(spc - k) * tb])
    return np.frombuffer(b"".join(parts), dtype=np.uint8)  # over bytes: read-only


def expected_range(layout: Layout, epoch: int, offset: int, length: int, size: int) -> bytes | None:
    """`expected_data(layout, epoch)[offset:offset + length].tobytes()` made of the slots the range touches alone:
    each used slot's `token_image` (the very bytes `expected_data` joins, or makes all at once), each unused one
    the epoch's poison. What a stale accept is judged on (`Memory.lazy_range`): the whole image of a region made
    for one range cost a fresh scenario with a stale accept ~100k instructions (issue 31). None where the image
    is not whole slots of this layout's region (`joins`; `size`, the region's, not `num_channels *
    slots_per_channel * token_bytes`) or the range is empty or not in it: the caller takes the whole image.
    tests/oracle/test_payload.py holds it to `expected_data` on random layouts and ranges."""
    tb, nc, spc = layout.token_bytes, layout.num_channels, layout.slots_per_channel
    per = layout.tokens_in_channel
    end = offset + length
    if (tb <= 0 or tb % CHUNK or size != nc * spc * tb or length <= 0 or offset < 0 or end > size
            or len(per) < nc or any(not 0 <= k <= spc for k in per[:nc])):
        return None
    first, last = offset // tb, (end - 1) // tb
    parts: list[bytes | memoryview] = []
    for q in range(first, last + 1):
        c, s = divmod(q, spc)
        parts.append(token_image(epoch, 0, c, s * nc + c, tb) if s < per[c] else canary_view(epoch, tb))
    out = b"".join(parts)
    at = offset - first * tb
    return out if at == 0 and len(out) == length else out[at:at + length]


def _expected_slots(nc: int, spc: int, tb: int, per: tuple[int, ...], epoch: int, src: int,
                    poison: bytes | memoryview) -> np.ndarray:
    """`expected_data` of whole chunks whose words fit u32: every used slot at once, then one join.

    The used slots' chunk prefixes (epoch, src << 16 | channel, token, 0), 16 bytes packed per slot, are
    repeated across each slot by one numpy copy from a zero-stride view (16 bytes a store, no call per
    chunk), the index ramp added to all of them in one pass (`index_ramp`: no carry, the prefix's last word
    is 0), each slot's trailer given the CRC-32 of the rest of it in place of its index, and the region
    joined from those slots and the poison. What `token_image` makes of each used slot, to the byte
    (tests/oracle/test_payload.py)."""
    n = tb // CHUNK
    pack = _PREFIX.pack
    prefixes: list[bytes] = []
    for c in range(nc):
        sc = (src << 16) | c
        for s in range(per[c]):
            prefixes.append(pack(epoch, sc, s * nc + c, 0))
    if not prefixes:  # a view with a zero in its shape casts to no bytes
        return np.frombuffer(poison, np.uint8)
    rest = memoryview(poison)  # the poison is 16-periodic and every slot 16-aligned: any slice of it will do
    words = np.ndarray((len(prefixes), n), _CHUNK16, b"".join(prefixes), 0, (CHUNK, 0)).copy().view(_WORD)
    words += index_ramp(n)
    view = words.data.cast("B")
    body = tb - CHUNK
    put = _CRC_WORD.pack_into
    parts: list[memoryview] = []
    off = 0
    for c in range(nc):
        k = per[c]
        first = off
        for _ in range(k):
            put(view, off + tb - 4, crc32(view[off:off + body]))
            off += tb
        if k:
            parts.append(view[first:off])
        if k < spc:
            parts.append(rest[:(spc - k) * tb])
    return np.frombuffer(b"".join(parts), np.uint8)  # over bytes: read-only


def expected_later(image: np.ndarray, layout: Layout, epoch: int, later: int) -> np.ndarray | None:
    """`expected_data(layout, later)` from `image`, `expected_data(layout, epoch)`; None where this does not
    apply (then make it anew): layouts `_expected_slots` makes (from `SLOTS_AT_ONCE` bytes of tokens), epochs
    under 2^16.

    Between two epochs every 16-byte chunk of the region differs in its first word alone, by the epochs' xor:
    a slot's chunks begin with the epoch, the canary's with `CANARY_TAG | epoch` (16 bits of it); and each used
    slot's trailer CRC by one constant, CRC-32 being affine (crc(a ^ d) = crc(a) ^ crc(d) ^ crc(zeros) over
    equal lengths), d the slot's body with the epochs' xor in each chunk's first word. So a later epoch's image
    is a copy with one strided xor over the first words and one over the used trailers: a multi-epoch run's
    later images cost no slot construction and no CRC per slot (issue 31). tests/oracle/test_payload.py holds
    it to `expected_data` on random layouts and epoch pairs."""
    tb, nc, spc = layout.token_bytes, layout.num_channels, layout.slots_per_channel
    per = layout.tokens_in_channel
    if (len(image) < SLOTS_AT_ONCE or not (0 <= epoch <= 0xFFFF and 0 <= later <= 0xFFFF) or tb <= 0
            or tb % CHUNK or len(image) != nc * spc * tb or len(per) < nc or sum(per[:nc]) * tb < SLOTS_AT_ONCE
            or any(not 0 <= k <= spc for k in per[:nc]) or nc * spc > _U32):
        return None
    x = epoch ^ later
    # the copy and the first words' xor in one contiguous pass (a copy and then a strided xor were two; the (n, 4)
    # words xor'd with (x, 0, 0, 0) broadcast cost more, a loop of 4 per chunk)
    words = np.bitwise_xor(image.view(_WORD), _first_words(x, len(image) // 4))
    body = tb - CHUNK
    k = crc32(_PREFIX.pack(x, 0, 0, 0) * (body // CHUNK)) ^ crc32(bytes(body))
    if k:  # each used slot's last word: slots [0, per[c]) of each channel c
        trailers = words.reshape(nc, spc, tb // 4)[:, :, tb // 4 - 1]
        used = np.arange(spc) < np.array(per[:nc])[:, None]
        np.bitwise_xor(trailers, np.uint32(k), out=trailers, where=used)
    out = words.view(np.uint8)
    out.flags.writeable = False
    return out


def _expected_by_copies(layout: Layout, epoch: int, src: int, poison: bytes | memoryview) -> np.ndarray:
    """`expected_data` of a layout that may not join to its region: poison, then each used slot's image
    copied in (a memoryview refuses an image whose size is not the slot's)."""
    tb, nc, spc = layout.token_bytes, layout.num_channels, layout.slots_per_channel
    img = bytearray(poison)
    view = memoryview(img)
    for c in range(nc):
        for s in range(layout.tokens_in_channel[c]):
            off = (c * spc + s) * tb
            view[off:off + tb] = token_image(epoch, src, c, s * nc + c, tb)
    out = np.frombuffer(img, dtype=np.uint8)
    out.flags.writeable = False
    return out


def start_writes(layout: Layout, epoch: int, poison: bool = True,
                 reset: bool = True) -> list[tuple[str, np.ndarray]]:
    """(region, bytes from offset 0) to write before epoch `epoch`, as read-only uint8 arrays.

    Epoch 0 always starts from poisoned slots and zeroed signals: a protocol that
    skips the poison or the reset does so between its own epochs, never on memory
    it has not set up.
    """
    return [(name, np.frombuffer(image, dtype=np.uint8)) for name, image in start_images(layout, epoch, poison, reset)]


def start_images(layout: Layout, epoch: int, poison: bool = True,
                 reset: bool = True) -> list[tuple[str, bytes | memoryview]]:
    """`start_writes` as bytes: what the sim's memory copies in (one pass over each region, not an array
    made and then copied out)."""
    sizes = layout.sizes
    out: list[tuple[str, bytes | memoryview]] = []
    if poison or epoch == 0:
        out.append((ops.DATA, canary_view(epoch, sizes[ops.DATA])))
    if reset or epoch == 0:
        out += [(name, bytes(sizes[name])) for name in RESET_REGIONS]
    return out


#: per xor of two epochs, u32 words (x, 0, 0, 0) repeated, as long as the largest image derived so far at least
#: (`expected_later`: one contiguous xor with it copies an image and changes its chunks' first words)
_FIRST_WORDS: Final[dict[int, np.ndarray]] = {}


def _first_words(x: int, n: int) -> np.ndarray:
    """n u32 words (n a multiple of 4) of chunks (x, 0, 0, 0), a read-only view of `_FIRST_WORDS[x]`."""
    have = _FIRST_WORDS.get(x)
    if have is None or len(have) < n:
        if have is None and len(_FIRST_WORDS) >= 16:
            _FIRST_WORDS.clear()
        m = max(n, 2 * len(have) if have is not None else 0) // 4 + 1
        have = _FIRST_WORDS[x] = np.frombuffer(_PREFIX.pack(x, 0, 0, 0) * m, _WORD)  # over bytes: read-only
    return have[:n]
