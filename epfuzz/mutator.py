"""A structure-aware custom mutator for the atheris harnesses.

Every byte string decodes to a valid scenario, so a *fresh* random input is a
fresh random scenario, and ordering bugs are often shallow in that space: in
`make bench`, random inputs through the decoder found each zoo bug in tens of
executions while plain libFuzzer mutation, growing inputs slowly from nothing,
needed thousands. This mutator keeps libFuzzer's corpus and coverage feedback but
mixes in moves that respect the IR: redraw one scenario field, redraw everything
after a field (a new suffix of decisions), or start a fresh scenario.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from epfuzz.choices import ChoiceReader

#: (move, weight): byte-level edits stay the most frequent
MOVES = (("bytes", 5), ("field", 3), ("suffix", 2), ("fresh", 1))
#: guided mode (a schedule sampler given, epfuzz.sampler): resampling the schedule of a kept input is the
#: main move, and a fresh input gets a sampled schedule too
GUIDED_MOVES = (("bytes", 2), ("field", 3), ("suffix", 1), ("fresh", 2), ("schedule", 6))


def byte_edit(data: bytes, max_size: int, rng: random.Random) -> bytes:
    """libFuzzer-style byte edits: change, insert, erase or duplicate bytes.

    (atheris.Mutate, libFuzzer's own mutator, refuses to run from this harness's custom
    mutator with atheris 3.0 -- "Fuzz() must be called before Mutate()" -- so the basic
    edits are done here.)
    """
    b = bytearray(data)
    op = rng.randrange(5)
    if not b or op == 0:
        b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
    elif op == 1:
        b[rng.randrange(len(b))] = rng.randrange(256)
    elif op == 2:
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif op == 3 and len(b) > 1:
        i = rng.randrange(len(b))
        del b[i:i + rng.randrange(1, 4)]
    else:
        i, j = sorted(rng.randrange(len(b) + 1) for _ in range(2))
        b[i:i] = b[i:j]
    return bytes(b[:max_size])


def field_bounds(data: bytes, decode: Callable[[ChoiceReader], object]) -> list[int]:
    """Byte offsets at which each draw of the decoder starts."""
    starts: list[int] = []

    class Recorder(ChoiceReader):
        def draw(self, lo: int, hi: int) -> int:
            starts.append(self.pos)
            return super().draw(lo, hi)

    decode(Recorder(data))
    return starts


def make_mutator(decode: Callable[[ChoiceReader], object],
                 schedule: Callable[[bytes, random.Random], bytes] | None = None) -> Callable[[bytes, int, int], bytes]:
    moves = GUIDED_MOVES if schedule is not None else MOVES
    names = [m for m, _ in moves]
    weights = [w for _, w in moves]

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        move = rng.choices(names, weights)[0]
        if schedule is not None and move in ("schedule", "fresh"):
            base = data if move == "schedule" else rng.randbytes(rng.randrange(1, min(max_size, 128) + 1))
            return schedule(base, rng)[:max_size]
        if move == "bytes" or (not data and move != "fresh"):
            return byte_edit(data, max_size, rng)
        if move == "fresh":
            return rng.randbytes(rng.randrange(1, min(max_size, 128) + 1))
        starts = field_bounds(data, decode)
        if not starts:
            return rng.randbytes(rng.randrange(1, min(max_size, 128) + 1))
        i = rng.randrange(len(starts))
        at = starts[i]
        end = starts[i + 1] if i + 1 < len(starts) else at + 2
        if move == "field":
            out = data[:at] + rng.randbytes(max(1, end - at)) + data[end:]
        else:  # suffix
            out = data[:at] + rng.randbytes(rng.randrange(1, 64))
        return out[:max_size]

    return mutate
