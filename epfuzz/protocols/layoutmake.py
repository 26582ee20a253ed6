"""`Protocol.layout`'s computation, compiled with the core (`epfuzz.core.native.COMPILED`): the layout of a fresh
configuration's numbers, made without the plain-Python frames of the computation and of `Layout.__init__`.

`Protocol.layout` memoizes it by exactly the numbers it reads (`base._layout`'s lru_cache: tokens, the three
per-token sizes, channels, `at_end_only` and the signal interval): a pure function of those, so the key is
complete. A fresh configuration mostly misses that cache (~60% of a first pass over the bench's inputs): the
interpreted miss cost ~22k instructions under callgrind, most of it the list comprehension, `max` and the
dataclass's `__init__` (issue 31). The `Layout` made here is the one `Layout(...)` makes from the same numbers:
same class, every field set, equal, same hash (tests/zoo/test_layoutmake.py, against the interpreted reference
and `dataclasses.fields`).
"""

from __future__ import annotations

from typing import Final, TypeVar

from epfuzz.ir.payload import pad16

L = TypeVar("L")  # `base.Layout` (not imported: base imports this module)

_new: Final = object.__new__


def layout_of(cls: type[L], tokens: int, hidden: int, scale: int, meta: int, c: int, at_end_only: object,
              interval: int) -> L:
    """`cls(...)` (`base.Layout`) of these numbers: `base._reference_layout`, written out."""
    token_bytes = pad16(hidden) + pad16(scale) + pad16(meta)
    per = tuple([len(range(ch, tokens, c)) for ch in range(c)])
    slots = max(1, max(per))  # (no channel: max() of nothing raises, as it did)
    if at_end_only:
        interval = slots
    max_signals = max(1, -(-slots // max(1, interval))) + 1
    o: L = _new(cls)
    object.__setattr__(o, "num_channels", c)
    object.__setattr__(o, "slots_per_channel", slots)
    object.__setattr__(o, "token_bytes", token_bytes)
    object.__setattr__(o, "max_signals", max_signals)
    object.__setattr__(o, "tokens_in_channel", per)
    return o
