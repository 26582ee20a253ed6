"""How the compiled receivers read receiver memory (`epfuzz.protocols.dispatch` and the protocols built on it).

A view with `bufs` (region -> bytearray, as `epfuzz.sim.memory.Memory`) is read directly, any other (a backend's,
a test's) through its methods; the same bytes and expressions as `Memory`'s methods, whose call from compiled
code cost a lookup, argument parsing and boxing per word (issue 31). Its own module: dispatch.py was at its
size bound.
"""

from __future__ import annotations

import struct
from typing import Final

from epfuzz.ir import ops
from epfuzz.protocols.base import MemoryView

# Final: compiled code reads them as constants, not a module-dict lookup per word (issue 31)
_U32X4: Final = struct.Struct("<4I")  # a CQE or a 16-byte chunk, as `MemoryView.u32x4` reads it
_U64: Final = struct.Struct("<Q")
_CQ: Final = ops.CQ  # the region names as constants (`ops` is plain Python: a module attribute get per use)
_RECV: Final = ops.RECV
#: struct.Struct("<" + "Q" * n) by n: all n tail words of signal memory in one read (`DispatchReceiver._poll_words`)
_TAILS: Final[dict[int, struct.Struct]] = {}
#: struct.Struct("<" + "II8x" * n) by n (WRITE_WITH_IMM: each entry's valid and immediate words) and
#: struct.Struct("<" + "I12x" * n) by -n (SEND: the valid word only): a CQ's entries in one read (`cq_seen`),
#: without the words it never looks at (the whole CQ as u32 was half its cost, issue 31)
_CQS: Final[dict[int, struct.Struct]] = {}
#: str(i) for the small numbers an accept's description names (slots, channels): no int-to-str per accept
_STRS: Final[tuple[str, ...]] = tuple(str(i) for i in range(256))


def _words(made: dict[int, struct.Struct], key: int, unit: str, n: int) -> struct.Struct:
    """The struct that reads n little-endian `unit`s, made on first use of `key` and kept in `made`."""
    st = made.get(key)
    if st is None:
        st = made[key] = struct.Struct("<" + unit * n)
    return st


def tail_words(n: int) -> struct.Struct:
    """The struct that reads n little-endian u64 words."""
    return _words(_TAILS, n, "Q", n)


def cq_words(n: int, imm: bool) -> struct.Struct:
    """The struct that reads, of n 16-byte CQ entries, each one's valid word and (imm) the word after it."""
    return _words(_CQS, n, "II8x", n) if imm else _words(_CQS, -n, "I12x", n)


def num_str(i: int) -> str:
    """`str(i)`, from a table for 0-255."""
    return _STRS[i] if 0 <= i < 256 else str(i)


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



def cq_seen(bufs: dict[str, bytearray], nch: int, ms: int, imm: bool, epoch: int, finished: list[bool],
            nxt: list[int]) -> list[int] | None:
    """`DispatchReceiver._observe` of every unfinished channel over completions (WRITE_WITH_IMM or SEND) in a view
    with `bufs`, as one flat list of (channel, finish, tail) (finish -1: a stale SEND message, tail its entry),
    `nxt` (the receiver's `next_cqe`) advanced past the entries read: the whole CQ read in one struct call, not a
    list and a struct call per channel and entry (issue 31). None (nothing read) for a CQ not of the layout's size.
    tests/zoo/test_poll_words.py holds a view with `bufs` to one read through its methods."""
    cq = bufs[_CQ]
    if len(cq) != 16 * nch * ms:
        return None
    ents: tuple[int, ...] = cq_words(nch * ms, imm).unpack(cq)  # the length is the struct's: checked above
    recv = cq if imm else bufs[_RECV]
    mark = epoch + 1
    seen: list[int] = []
    for c in range(nch):
        if finished[c]:
            continue
        k = nxt[c]
        while k < ms:
            e = c * ms + k  # entry e: ents[2e] valid, ents[2e + 1] immediate (imm); else ents[e] valid
            if ents[2 * e if imm else e] != mark:
                break
            if imm:
                lo = ents[2 * e + 1]
                seen.append(c)
                seen.append(lo & 1)
                seen.append((lo >> 1) & 0x7FFFFF)
            else:  # SEND: the tail is in the message, which must carry this epoch
                msg = buf_u64(recv, e * 16)
                seen.append(c)
                if msg >> 48 != mark:
                    seen.append(-1)
                    seen.append(k)
                else:
                    seen.append(msg & 1)
                    seen.append((msg >> 32) & 0xFFFF)
            k += 1
        nxt[c] = k
    return seen
