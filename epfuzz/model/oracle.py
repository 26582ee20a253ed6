"""The oracle: did the receiver consume anything that is not this epoch's payload?

It never trusts the receiver's own view: it compares the bytes the receiver read
(the instant after it saw the signal) with the exact image the sender meant to
deliver, and when they differ it says which 16-byte chunks were wrong and what
they held (this epoch's poison, an older epoch's payload, or garbage).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from epfuzz.infra.errors import ProtocolError
from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK, classify_chunks, classify_words
from epfuzz.protocols.base import Consume, Layout

MAX_REPORTED_CHUNKS: Final = 64
#: the dtypes and numpy functions a stale accept's details call, bound once: compiled code reads Final names as
#: constants (a module attribute is a dict lookup per use) and a dtype object spares numpy a string's parse
_U64: Final = np.dtype("<u8")
_U32: Final = np.dtype("<u4")
_U16: Final = np.dtype("<u2")
_BOOL: Final = np.dtype(np.bool_)
_BYTE: Final = np.dtype(np.uint8)
_frombuffer: Final = np.frombuffer
_count_nonzero: Final = np.count_nonzero
_not_equal: Final = np.not_equal
#: per run length n of chunks (up to the shown ones'), their first and last u32 words in one struct read: the
#: shown chunks are mostly one run (whole TLPs not landed), and a struct read is one call where numpy's strided
#: columns are five
_SPANS: Final = [struct.Struct("<" + "I8xI" * n) for n in range(MAX_REPORTED_CHUNKS + 1)]


@dataclass(init=False)
class Violation:
    kind: str                      # "stale-accept" or "hang"
    protocol: str
    epoch: int
    channel: int
    what: str
    region: str = ops.DATA
    offset: int = 0
    length: int = 0
    bad_chunks: list[tuple[int, str]] = field(default_factory=list)   # (byte offset in region, class)
    bad_bytes: int = 0
    stale_chunks: int = 0          # every wrong 16-byte chunk; `bad_chunks` lists the first 64
    tokens: list[int] = field(default_factory=list)
    trigger: int = -1              # seq of the TLP whose visibility woke the receiver
    position: int = -1             # how many TLPs were visible at that moment
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, kind: str, protocol: str, epoch: int, channel: int, what: str, region: str = ops.DATA,
                 offset: int = 0, length: int = 0, bad_chunks: list[tuple[int, str]] | None = None,
                 bad_bytes: int = 0, stale_chunks: int = 0, tokens: list[int] | None = None, trigger: int = -1,
                 position: int = -1, extra: dict[str, Any] | None = None) -> None:
        """The dataclass's own `__init__`, written out: the generated one is interpreted even under mypyc, and
        a stale accept makes one per execution of a buggy protocol (6k instructions -> under 1k, issue 31).
        `dataclass(init=False)` keeps its fields, eq and repr; None stands for the empty default."""
        self.kind, self.protocol, self.epoch, self.channel, self.what = kind, protocol, epoch, channel, what
        self.region, self.offset, self.length = region, offset, length
        self.bad_chunks = [] if bad_chunks is None else bad_chunks
        self.bad_bytes, self.stale_chunks = bad_bytes, stale_chunks
        self.tokens = [] if tokens is None else tokens
        self.trigger, self.position = trigger, position
        self.extra = {} if extra is None else extra

    def summary(self) -> str:
        if self.epoch < 0:  # the cuda backend: rounds of a GPU litmus, not epochs, slots and tokens
            return self._gpu_summary()
        if self.kind == "hang":
            return f"{self.protocol}: receiver never completed epoch {self.epoch} ({self.what})"
        classes = sorted({c for _, c in self.bad_chunks})
        if self.kind == "overwritten-while-read":  # its bytes had all landed: "not yet landed" misled (fixers)
            return (f"{self.protocol}: accepted {self.what} in epoch {self.epoch}, then {self.bad_bytes} bytes of it "
                    f"overwritten by a later epoch while still read ({', '.join(classes)}), tokens {self.tokens}")
        return (f"{self.protocol}: accepted {self.what} in epoch {self.epoch} with {self.bad_bytes} bytes "
                f"not yet landed ({', '.join(classes)}), tokens {self.tokens}")

    def _gpu_summary(self) -> str:
        if self.kind == "hang":
            return f"{self.protocol}: a wait timed out: {self.what}"
        x = self.extra
        litmus = self.what.split(" rounds ", 1)[-1] if " rounds " in self.what else ""
        return (f"{self.protocol}: in {x.get('stale_rounds', '?')} of {x.get('rounds', '?')} rounds {litmus} the "
                f"consumer saw the flag before the data: {x.get('stale_words', self.bad_bytes // 4)} 32-bit words "
                "read stale in all").replace("  ", " ")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "protocol": self.protocol, "epoch": self.epoch, "channel": self.channel,
            "what": self.what, "region": self.region, "offset": self.offset, "length": self.length,
            "bad_bytes": self.bad_bytes, "stale_chunks": self.stale_chunks,
            "bad_chunks": [list(x) for x in self.bad_chunks],
            "tokens": self.tokens, "trigger": self.trigger, "position": self.position, **self.extra,
        }


def check(consume: Consume, actual: np.ndarray, expected: np.ndarray | None, layout: Layout,
          protocol: str, epoch: int) -> Violation | None:
    """`actual`/`expected` are the consumed region's arrays; None expected = always wrong."""
    o, n = consume.offset, consume.length
    # bytes compare with memcmp; memoryview equality goes element by element (50x slower at 4 KiB)
    return check_bytes(consume, actual[o:o + n].tobytes(), None if expected is None else expected[o:o + n].tobytes(),
                       layout, protocol, epoch)


def check_bytes(consume: Consume, a: bytes, e: bytes | None, layout: Layout, protocol: str,
                epoch: int) -> Violation | None:
    """`check` of the consumed bytes themselves: `a` as read, `e` as expected (None: always wrong)."""
    if e is not None and a == e:
        return None
    v = Violation("stale-accept", protocol, epoch, consume.channel, consume.what, consume.region,
                  consume.offset, consume.length)
    if e is None:
        v.bad_bytes = consume.length
        v.bad_chunks = [(consume.offset, "stale")]
        v.stale_chunks = 1
        return v
    if len(a) % CHUNK or len(e) != len(a):
        return _details_by_bytes(v, a, e, layout, epoch)
    # the wrong bytes' count, the wrong chunks and slots with as few numpy calls as give them: a stale
    # accept is most of what a search over a buggy protocol executes, and each call costs a few thousand
    # instructions (a `take` or a fancy index seven, a compare with a Python int eight). The bytes compared as
    # a bool per byte (counted by popcount); a chunk is two u64 of those bools, wrong iff either is not 0, so
    # the pair's two bools (`astype`) read as one u16; the shown chunks classified from their first and last
    # words, read as two strided columns from the first shown chunk to the last (a run of wrong chunks, mostly:
    # no gather), and the slots by memcmp (145k -> ~45k instructions a stale accept on the #661 slot, issue 31)
    ne = _not_equal(_frombuffer(a, _BYTE), _frombuffer(e, _BYTE))
    v.bad_bytes = int(_count_nonzero(ne))
    diff = ne.view(_U64).astype(_BOOL).view(_U16).nonzero()[0]
    n = len(diff)
    ks: list[int] = diff[:MAX_REPORTED_CHUNKS].tolist()
    tb = layout.token_bytes
    off = consume.offset
    if whole_slots(tb, off, consume.length):
        last = ks[n - 1] if n <= MAX_REPORTED_CHUNKS else int(diff[n - 1])
        return stale_details(v, a, e, ks, n, last, layout, epoch)
    v.stale_chunks = n
    _shown(v, a, ks, epoch)
    slots = np.unique((off + diff * CHUNK) // tb).tolist()
    v.tokens = sorted(layout.token_of(s // layout.slots_per_channel, s % layout.slots_per_channel) for s in slots)
    return v


def whole_slots(tb: int, off: int, length: int) -> bool:
    """Whether [off, off + length) is whole slots of `tb` bytes, each whole chunks (what receivers accept)."""
    return tb > 0 and tb % CHUNK == 0 and off % tb == 0 and length % tb == 0


def _shown(v: Violation, a: bytes, ks: list[int], epoch: int) -> None:
    """`v.bad_chunks`: the shown wrong chunks `ks` (indices from the range's start, ascending) classified from
    their first and last words as read (`a`)."""
    lo = ks[0]
    hi = ks[len(ks) - 1] + 1
    if hi - lo < len(_SPANS):  # one struct read of the span's (first, last) words: (w0, w3) per chunk
        ws: tuple[int, ...] = _SPANS[hi - lo].unpack_from(a, lo * CHUNK)
    else:  # wrong chunks spread wider: the same pairs through numpy
        ws = tuple(_frombuffer(a, _U32, 4 * (hi - lo), lo * CHUNK).reshape(-1, 4)[:, 0::3].ravel().tolist())
    off = v.offset
    v.bad_chunks = [(off + k * CHUNK, classify_words(ws[2 * (k - lo)], ws[2 * (k - lo) + 1], epoch)) for k in ks]


def stale_details(v: Violation, a: bytes, e: bytes, ks: list[int], n: int, last: int, layout: Layout,
                  epoch: int, shown: list[tuple[int, str]] | None = None) -> Violation:
    """A stale accept of whole slots (`whole_slots`), its wrong bytes counted (`v.bad_bytes`): its `n` wrong
    chunks, of which `ks` are the first (up to `MAX_REPORTED_CHUNKS`) and `last` the last, shown (`shown`: as the
    caller classified them already) and their slots' tokens named. A slot is wrong iff its bytes differ, from the
    first wrong chunk's slot to the last's (one slot: the wrong chunk's, with no compare)."""
    v.stale_chunks = n
    if shown is None:
        _shown(v, a, ks, epoch)
    else:
        v.bad_chunks = shown
    tb = layout.token_bytes
    off = v.offset
    first = ks[0] * CHUNK // tb
    last = last * CHUNK // tb
    slots = [off // tb + first] if first == last else \
        [off // tb + s for s in range(first, last + 1) if a[s * tb:(s + 1) * tb] != e[s * tb:(s + 1) * tb]]
    v.tokens = sorted(layout.token_of(s // layout.slots_per_channel, s % layout.slots_per_channel) for s in slots)
    return v


def _details_by_bytes(v: Violation, a: bytes, e: bytes, layout: Layout, epoch: int) -> Violation:
    """The details of a range that is not whole chunks, as the vectorised form before issue 31 made them
    (its chunk views need whole chunks: such a range raises the same error as it did)."""
    aa, ee = np.frombuffer(a, dtype=np.uint8), np.frombuffer(e, dtype=np.uint8)
    ne = aa != ee
    halves = ne.view(np.uint64)
    rows = (halves[0::2] | halves[1::2]) != 0
    diff = np.flatnonzero(rows)
    v.bad_bytes = int(np.count_nonzero(ne))
    v.stale_chunks = len(diff)
    shown = diff[:MAX_REPORTED_CHUNKS]
    words = aa.reshape(-1, CHUNK)[shown].view("<u4")
    v.bad_chunks = list(zip((v.offset + shown * CHUNK).tolist(), classify_chunks(words, epoch)))
    v.tokens = sorted(layout.token_of(s // layout.slots_per_channel, s % layout.slots_per_channel)
                      for s in np.unique((v.offset + diff * CHUNK) // layout.token_bytes).tolist())
    return v


def judge(consume: Consume, region: np.ndarray | bytearray, expected: np.ndarray, layout: Layout, protocol: str,
          epoch: int) -> Violation | None:
    """The receiver step's verdict on one accepted range, for every backend alike.

    `region` is the consumed region's bytes as the receiver saw them, `expected`
    this epoch's data image: only data has an expected image; anything accepted
    from another region as payload is wrong by construction.
    """
    in_region(consume, len(region), protocol, epoch)
    # `region` as the sim keeps it (a bytearray) or as an array: only the accepted range is copied out
    o, n = consume.offset, consume.length
    e = expected[o:o + n].tobytes() if consume.region == ops.DATA else None
    return check_bytes(consume, bytes(region[o:o + n]), e, layout, protocol, epoch)


def in_region(consume: Consume, size: int, protocol: str, epoch: int) -> None:
    """Raise unless the accepted range lies in its region of `size` bytes (`judge`'s first step)."""
    if consume.offset < 0 or consume.length < 0 or consume.offset + consume.length > size:
        # a slice past the end compares nothing: an accept outside the region would pass unchecked
        raise ProtocolError(f"protocol {protocol!r}, epoch {epoch}: the receiver accepted {consume.what!r} at "
                            f"{consume.region}+{consume.offset}, {consume.length} bytes, outside the region "
                            f"({size} bytes)")
