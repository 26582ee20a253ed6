"""How the compiled receivers read receiver memory (`epfuzz.protocols.dispatch` and the protocols built on it).

A view with `bufs` (region -> bytearray, as `epfuzz.sim.memory.Memory`) is read directly, any other (a backend's,
a test's) through its methods; the same bytes and expressions as `Memory`'s methods, whose call from compiled
code cost a lookup, argument parsing and boxing per word (issue 31). Its own module: dispatch.py was at its
size bound.
"""

from __future__ import annotations

import struct
from typing import Final

from epfuzz.protocols.base import MemoryView

# Final: compiled code reads them as constants, not a module-dict lookup per word (issue 31)
_U32X4: Final = struct.Struct("<4I")  # a CQE or a 16-byte chunk, as `MemoryView.u32x4` reads it
_U64: Final = struct.Struct("<Q")
#: struct.Struct("<nQ") by n: all n tail words of signal memory in one read (`DispatchReceiver._poll_words`)
_TAILS: Final[dict[int, struct.Struct]] = {}


def tail_words(n: int) -> struct.Struct:
    """The struct that reads n little-endian u64 words (made on first use of n, then kept)."""
    st = _TAILS.get(n)
    if st is None:
        st = _TAILS[n] = struct.Struct(f"<{n}Q")
    return st


def mem_u64(mem: MemoryView, region: str, offset: int) -> int:
    """`mem.u64(region, offset)`."""
    bufs: dict[str, bytearray] | None = getattr(mem, "bufs", None)
    if bufs is None:
        return mem.u64(region, offset)
    return buf_u64(bufs[region], offset)


def buf_u64(buf: bytearray, offset: int) -> int:
    """The little-endian u64 at `offset` of a region's bytes, as `Memory.u64` reads it."""
    if 0 <= offset <= len(buf) - 8:  # no slice object; the same int as the slice's int.from_bytes
        u: int = _U64.unpack_from(buf, offset)[0]
        return u
    return int.from_bytes(buf[offset:offset + 8], "little")


def mem_u32x4(mem: MemoryView, region: str, offset: int) -> tuple[int, int, int, int]:
    """`mem.u32x4(region, offset)`."""
    bufs: dict[str, bytearray] | None = getattr(mem, "bufs", None)
    if bufs is None:
        return mem.u32x4(region, offset)
    a, b, c, d = _U32X4.unpack_from(bufs[region], offset)
    return a, b, c, d


def mem_read(mem: MemoryView, region: str, offset: int, length: int) -> bytes:
    """`mem.read(region, offset, length)`."""
    bufs: dict[str, bytearray] | None = getattr(mem, "bufs", None)
    if bufs is None:
        return mem.read(region, offset, length)
    return bytes(bufs[region][offset:offset + length])
