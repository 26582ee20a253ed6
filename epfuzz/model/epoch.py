"""What every backend does at an epoch's start, and the image the epoch should leave.

The sim memory and the verbs runner both poison the data slots and zero the
signal words, CQ and receive rings before an epoch; writing that once here keeps
the two backends meaning the same thing by "epoch start".
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

import numpy as np

from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK, canary_bytes, token_image
from epfuzz.protocols.base import Layout

#: regions the receiver zeroes before an epoch (behind the epoch barrier)
RESET_REGIONS: Final = (ops.SIGNAL, ops.CQ, ops.RECV)


@lru_cache(maxsize=256)
def expected_data(layout: Layout, epoch: int, src: int = 0) -> np.ndarray:
    """This epoch's data region as the sender means it (unused slots hold poison, read-only).

    One `bytes.join` of each channel's used slots' `token_image`s and a slice of the poison for the rest: the
    region written once. Poison copied into a bytearray, then each token copied over it through a slice,
    wrote the used slots twice and cost a slice object and an assignment per token (issue 31). The images
    come from that function's cache: a guided search's fresh configurations keep making layouts this cache
    has not seen (one per epoch), but of slots whose (epoch, channel, token, size) it has. A layout this
    cannot join to the region's size (a token size not a positive multiple of 16 bytes, or more tokens in a
    channel than it has slots) is copied token by token as before, which raises where the sizes disagree.
    tests/oracle/test_payload.py holds it to the vectorised construction on random layouts.
    """
    size, tb = layout.sizes[ops.DATA], layout.token_bytes
    nc, spc = layout.num_channels, layout.slots_per_channel
    per = layout.tokens_in_channel
    poison = canary_bytes(epoch, size)  # the same call as the epoch-start image's: a cache hit
    if tb <= 0 or tb % CHUNK or len(per) < nc or any(not 0 <= k <= spc for k in per[:nc]):
        return _expected_by_copies(layout, epoch, src, poison)
    rest = memoryview(poison)  # the poison is 16-periodic and every slot 16-aligned: any slice of it will do
    parts: list[bytes | memoryview] = []
    for c in range(nc):
        k = per[c]
        for s in range(k):
            parts.append(token_image(epoch, src, c, s * nc + c, tb))
        if k < spc:
            parts.append(rest[:(spc - k) * tb])
    out = np.frombuffer(b"".join(parts), dtype=np.uint8)  # over bytes: read-only
    return out


def _expected_by_copies(layout: Layout, epoch: int, src: int, poison: bytes) -> np.ndarray:
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


def start_images(layout: Layout, epoch: int, poison: bool = True, reset: bool = True) -> list[tuple[str, bytes]]:
    """`start_writes` as bytes: what the sim's memory copies in (one pass over each region, not an array
    made and then copied out)."""
    sizes = layout.sizes
    out: list[tuple[str, bytes]] = []
    if poison or epoch == 0:
        out.append((ops.DATA, canary_bytes(epoch, sizes[ops.DATA])))
    if reset or epoch == 0:
        out += [(name, bytes(sizes[name])) for name in RESET_REGIONS]
    return out


def start_buffers(sizes: dict[str, int]) -> dict[str, bytearray]:
    """Fresh buffers of every region (`Layout.sizes`) as epoch 0's start leaves them: `start_images(layout, 0)`
    written over zeroed regions, made without those images (the zeroed ones would be made only to be copied)."""
    return {name: bytearray(canary_bytes(0, size)) if name == ops.DATA else bytearray(size)
            for name, size in sizes.items()}
