"""What every backend does at an epoch's start, and the image the epoch should leave.

The sim memory and the verbs runner both poison the data slots and zero the
signal words, CQ and receive rings before an epoch; writing that once here keeps
the two backends meaning the same thing by "epoch start".
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from epfuzz.ir import ops
from epfuzz.ir.payload import canary_bytes, token_image
from epfuzz.protocols.base import Layout

#: regions the receiver zeroes before an epoch (behind the epoch barrier)
RESET_REGIONS = (ops.SIGNAL, ops.CQ, ops.RECV)


@lru_cache(maxsize=256)
def expected_data(layout: Layout, epoch: int, src: int = 0) -> np.ndarray:
    """This epoch's data region as the sender means it (unused slots hold poison, read-only).

    Poison by repetition, then each used slot's `token_image` copied in. The images come from that
    function's cache: a guided search's fresh configurations keep making layouts this cache has not
    seen (one per epoch), but of slots whose (epoch, channel, token, size) it has, so each token is
    a copy; a deep-zoo layout (a dozen 14,400-byte tokens) cost 200 us when all tokens' words were
    built and checksummed at once (issue 31). tests/oracle/test_payload.py holds it to that vectorised
    construction on random layouts.
    """
    size, tb = layout.sizes[ops.DATA], layout.token_bytes
    img = bytearray(canary_bytes(epoch, size))
    view = memoryview(img)  # one copy per token: `img[a:b] = some_bytes` copies them to a temporary first
    nc, spc = layout.num_channels, layout.slots_per_channel
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
