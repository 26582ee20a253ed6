"""The byte spans a receiver says its poll reads (`Receiver.watch_bytes`), and which of them a TLP touches: what
`epfuzz.sim.receive.Receiving.land` decides a wake by. Its own module: receive.py was at its size bound."""

from __future__ import annotations

from collections.abc import Sequence

from epfuzz.sim.packets import A_FETCH, A_READ, Tlp


def merged(ranges: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """(offset, length) ranges as sorted, disjoint [start, end) spans: starts and ends."""
    starts: list[int] = []
    ends: list[int] = []
    for off, length in sorted(ranges):
        if length <= 0:
            continue
        if ends and off <= ends[-1]:
            ends[-1] = max(ends[-1], off + length)
        else:
            starts.append(off)
            ends.append(off + length)
    return starts, ends


def touched(t: Tlp, spans: tuple[list[int], list[int]] | None) -> tuple[int, int]:
    """The bytes of `t` a receiver reads, as one [lo, hi) from the first watched byte it writes to the
    last (hi <= lo: none); a READ writes nothing. What lies between two spans is compared too: a change
    there only costs a poll that finds nothing."""
    if t.action == A_READ or t.action == A_FETCH:
        return 0, 0
    lo, hi = t.off, t.off + t.length
    if spans is None:
        return lo, hi
    starts, ends = spans
    j = bisect_right(ends, lo)  # the first span ending after lo
    if j == len(ends) or starts[j] >= hi:
        return 0, 0
    k = bisect_right(starts, hi - 1) - 1  # the last span starting before hi
    return max(lo, starts[j]), min(hi, ends[k])


def bisect_right(xs: list[int], x: int) -> int:
    """`bisect.bisect_right(xs, x)` in compiled code: a call into the bisect module boxed its arguments and
    parsed them by keyword, more than the search over a few spans or runs costs (issue 31); the adversary's
    stream positions use it too."""
    lo, hi = 0, len(xs)
    while lo < hi:
        mid = (lo + hi) // 2
        if x < xs[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo
