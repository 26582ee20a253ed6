"""A memory view for receiver tests: regions as bytearrays in `bufs`, read by `u64`/`u32x4`/`read` the way
`epfuzz.sim.memory.Memory` reads them (the compiled receivers read `bufs` directly where a view has it)."""

from __future__ import annotations

import struct

_U32X4 = struct.Struct("<4I")


class BufsView:
    """Regions by name, each a bytearray of the bytes given."""

    def __init__(self, regions: dict[str, bytes]) -> None:
        self.bufs = {name: bytearray(data) for name, data in regions.items()}

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self.bufs[region][offset:offset + 8], "little")

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        a, b, c, d = _U32X4.unpack_from(self.bufs[region], offset)
        return a, b, c, d

    def read(self, region: str, offset: int, length: int) -> bytes:
        return bytes(self.bufs[region][offset:offset + length])
