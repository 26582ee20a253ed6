"""What every backend does at an epoch's start, and the image the epoch should leave.

The sim memory and the verbs runner both poison the data slots and zero the
signal words, CQ and receive rings before an epoch; writing that once here keeps
the two backends meaning the same thing by "epoch start".
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from epfuzz import ops
from epfuzz.payload import canary, token_image
from epfuzz.protocols.base import Layout

#: regions the receiver zeroes before an epoch (behind the epoch barrier)
RESET_REGIONS = (ops.SIGNAL, ops.CQ, ops.RECV)


@lru_cache(maxsize=256)
def expected_data(layout: Layout, epoch: int, src: int = 0) -> np.ndarray:
    """This epoch's data region as the sender means it (unused slots hold poison)."""
    size = layout.sizes[ops.DATA]
    img = canary(epoch, size).copy()
    for c in range(layout.num_channels):
        for s in range(layout.tokens_in_channel[c]):
            off = layout.slot_offset(c, s)
            img[off:off + layout.token_bytes] = np.frombuffer(
                token_image(epoch, src, c, layout.token_of(c, s), layout.token_bytes), dtype=np.uint8)
    img.flags.writeable = False
    return img


def start_writes(layout: Layout, epoch: int, poison: bool = True,
                 reset: bool = True) -> list[tuple[str, np.ndarray]]:
    """(region, bytes from offset 0) to write before epoch `epoch`.

    Epoch 0 always starts from poisoned slots and zeroed signals: a protocol that
    skips the poison or the reset does so between its own epochs, never on memory
    it has not set up.
    """
    sizes = layout.sizes
    out: list[tuple[str, np.ndarray]] = []
    if poison or epoch == 0:
        out.append((ops.DATA, canary(epoch, sizes[ops.DATA])))
    if reset or epoch == 0:
        out += [(name, np.zeros(sizes[name], dtype=np.uint8)) for name in RESET_REGIONS]
    return out
