"""What every backend does at an epoch's start, and the image the epoch should leave.

The sim memory and the verbs runner both poison the data slots and zero the
signal words, CQ and receive rings before an epoch; writing that once here keeps
the two backends meaning the same thing by "epoch start".
"""

from __future__ import annotations

import zlib
from functools import lru_cache

import numpy as np

from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK, canary, canary_bytes, token_image
from epfuzz.protocols.base import Layout

#: regions the receiver zeroes before an epoch (behind the epoch barrier)
RESET_REGIONS = (ops.SIGNAL, ops.CQ, ops.RECV)


@lru_cache(maxsize=256)
def expected_data(layout: Layout, epoch: int, src: int = 0) -> np.ndarray:
    """This epoch's data region as the sender means it (unused slots hold poison).

    Built for all tokens at once (random scenarios rarely share a layout, so the
    cache misses often): the same bytes as `token_image` per slot.
    """
    size, tb = layout.sizes[ops.DATA], layout.token_bytes
    img = canary(epoch, size).copy()
    n = tb // CHUNK
    if n == 0 or tb % CHUNK:  # pragma: no cover - layouts hold whole chunks
        return _expected_per_token(layout, epoch, src, img)
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
    img.flags.writeable = False
    return img


def _expected_per_token(layout: Layout, epoch: int, src: int, img: np.ndarray) -> np.ndarray:
    for c in range(layout.num_channels):
        for s in range(layout.tokens_in_channel[c]):
            off = layout.slot_offset(c, s)
            img[off:off + layout.token_bytes] = np.frombuffer(
                token_image(epoch, src, c, layout.token_of(c, s), layout.token_bytes), dtype=np.uint8)
    img.flags.writeable = False
    return img


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
