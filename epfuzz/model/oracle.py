"""The oracle: did the receiver consume anything that is not this epoch's payload?

It never trusts the receiver's own view: it compares the bytes the receiver read
(the instant after it saw the signal) with the exact image the sender meant to
deliver, and when they differ it says which 16-byte chunks were wrong and what
they held (this epoch's poison, an older epoch's payload, or garbage).
"""

from __future__ import annotations

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
_BYTE: Final = np.dtype(np.uint8)
_frombuffer: Final = np.frombuffer
_count_nonzero: Final = np.count_nonzero


@dataclass
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

    def summary(self) -> str:
        if self.epoch < 0:  # the cuda backend: rounds of a GPU litmus, not epochs, slots and tokens
            return self._gpu_summary()
        if self.kind == "hang":
            return f"{self.protocol}: receiver never completed epoch {self.epoch} ({self.what})"
        classes = sorted({c for _, c in self.bad_chunks})
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
    # accept is most of what a search over a buggy protocol executes, and each call costs a microsecond;
    # the words XORed (a chunk is two of them: wrong iff their OR is not 0), the shown chunks classified
    # from their words in plain ints, and the slots by memcmp: 38 -> 14 us on the #661 slot (issue 31)
    x = _frombuffer(a, _U64) ^ _frombuffer(e, _U64)
    v.bad_bytes = int(_count_nonzero(x.view(_BYTE)))
    diff = (x[0::2] | x[1::2]).nonzero()[0]
    v.stale_chunks = len(diff)
    shown = diff[:MAX_REPORTED_CHUNKS]
    # each shown chunk's first and last words (all its class depends on), as lists of ints
    words = _frombuffer(a, _U32).reshape(-1, 4)
    ks: list[int] = shown.tolist()
    w0s: list[int] = words[:, 0].take(shown).tolist()
    w3s: list[int] = words[:, 3].take(shown).tolist()
    off = consume.offset
    v.bad_chunks = [(off + ks[i] * CHUNK, classify_words(w0s[i], w3s[i], epoch)) for i in range(len(ks))]
    tb = layout.token_bytes
    if tb > 0 and tb % CHUNK == 0 and off % tb == 0 and consume.length % tb == 0:
        # whole slots (what receivers accept): a slot is wrong iff its bytes differ, from the first wrong
        # chunk's slot to the last's
        first, last = int(diff[0]) * CHUNK // tb, int(diff[-1]) * CHUNK // tb
        slots = [off // tb + s for s in range(first, last + 1) if a[s * tb:(s + 1) * tb] != e[s * tb:(s + 1) * tb]]
    else:
        slots = np.unique((off + diff * CHUNK) // tb).tolist()
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
