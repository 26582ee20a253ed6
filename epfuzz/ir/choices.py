"""The byte stream under every scenario: bounded integer draws, Hypothesis-style.

Each draw of an integer in [lo, hi] consumes just enough big-endian bytes to cover
the span and maps them with a modulo, so any byte string decodes to *some* valid
value (the fuzzer never wastes an input on a parse error), and writing `v - lo`
back reproduces the value exactly (the round-trip property the corpus relies on).
Running out of bytes yields zeros, i.e. the simplest value: a shorter input is a
simpler scenario, which is what libFuzzer's -minimize_crash and our shrinker want.
"""

from __future__ import annotations


def _width(span: int) -> int:
    """Bytes needed to hold values 0..span-1."""
    if span <= 256:
        return 1
    return max(1, ((span - 1).bit_length() + 7) // 8)


class ChoiceReader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def draw(self, lo: int, hi: int) -> int:
        span = hi - lo + 1
        if span <= 1:
            return lo
        pos = self.pos
        if span <= 256:  # the common case: one byte
            self.pos = pos + 1
            return lo + (self.data[pos] % span if pos < len(self.data) else 0)
        n = _width(span)
        chunk = self.data[pos : pos + n]
        self.pos = pos + n
        raw = int.from_bytes(chunk.ljust(n, b"\0"), "big")
        return lo + raw % span

    def remaining(self) -> int:
        return max(0, len(self.data) - self.pos)


class ChoiceWriter:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, lo: int, hi: int, value: int) -> None:
        span = hi - lo + 1
        if span <= 1:
            return
        if not lo <= value <= hi:
            raise ValueError(f"{value} outside [{lo}, {hi}]")
        self.parts.append((value - lo).to_bytes(_width(span), "big"))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)
