"""Receiver memory (numpy byte arrays) where TLPs land; `expected_data` is re-exported from `epfuzz.epoch`."""

from __future__ import annotations

import numpy as np

from epfuzz.epoch import expected_data, start_writes
from epfuzz.protocols.base import Layout
from epfuzz.sim.packets import Tlp, TlpAction

MASK64 = (1 << 64) - 1
# bound once: `TlpAction.X` is a slow attribute lookup on Python 3.11, and `apply` runs per TLP
_COPY, _VALUE, _ADD, _READ, _CQE = TlpAction.COPY, TlpAction.VALUE, TlpAction.ADD, TlpAction.READ, TlpAction.CQE

__all__ = ["Memory", "expected_data"]


class Memory:
    """One array per region; TLPs land here in visibility order."""

    __slots__ = ("layout", "regions", "expected", "epoch")

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.regions = {name: np.zeros(size, dtype=np.uint8) for name, size in layout.sizes.items()}
        self.expected = expected_data(layout, 0)
        self.epoch = 0

    def start_epoch(self, epoch: int, poison: bool = True, reset: bool = True) -> None:
        """Poison the slots with this epoch's canary; reset signal words and CQ (receiver cleanup)."""
        self.epoch = epoch
        for name, image in start_writes(self.layout, epoch, poison, reset):
            self.regions[name][:] = image
        self.expected = expected_data(self.layout, epoch)

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self.regions[region][offset:offset + 8].tobytes(), "little")

    def read(self, region: str, offset: int, length: int) -> bytes:
        return self.regions[region][offset:offset + length].tobytes()

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        w = self.regions[region][offset:offset + 16].view("<u4")
        return int(w[0]), int(w[1]), int(w[2]), int(w[3])

    def apply(self, t: Tlp) -> None:
        arr = self.regions[t.region]
        a = t.action
        if a == _COPY:  # value = source shift (0: the bytes the receiver expects there)
            src = t.off + t.value
            arr[t.off:t.off + t.length] = self.expected[src:src + t.length]
        elif a == _VALUE:
            arr[t.off:t.off + 8] = np.frombuffer((t.value & MASK64).to_bytes(8, "little"), dtype=np.uint8)
        elif a == _ADD:  # atomic: one TLP, or the RMW's write-back after its read
            v = (self.u64(t.region, t.off) + t.value) & MASK64
            arr[t.off:t.off + 8] = np.frombuffer(v.to_bytes(8, "little"), dtype=np.uint8)
        elif a == _CQE:
            words = np.array([self.epoch + 1, t.value & 0xFFFFFFFF, (t.value >> 32) & 0xFFFFFFFF, t.qp],
                             dtype="<u4")
            arr[t.off:t.off + 16] = words.view(np.uint8)
        elif a != _READ:  # pragma: no cover
            raise AssertionError(a)

    def snapshot(self) -> dict[str, bytes]:
        return {k: v.tobytes() for k, v in self.regions.items()}

    def restore(self, snap: dict[str, bytes]) -> None:
        for k, b in snap.items():
            self.regions[k][:] = np.frombuffer(b, dtype=np.uint8)
