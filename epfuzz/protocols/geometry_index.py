"""Bug-zoo pattern 10: geometry-dependent indexing.

`geometry_index` is the bug as shipped (a sender slot index that depends on the channel count),
`geometry_index_fixed` the fix as shipped. Both are the dispatch sender and receiver
(`epfuzz.protocols.dispatch`) with fields pinned; `sources` on each names the issues and commits
they reproduce.
"""

from __future__ import annotations

from epfuzz.protocols.base import Pattern
from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol

PATTERN = Pattern(10, "geometry-dependent indexing")

BAD = DispatchProtocol(
    "geometry_index", "the sender computes a token's slot with a power-of-two stride the receiver does not use: "
    "right for 1, 2, 4 or 8 channels, wrong for the others",
    {**STRICT_SAME_QP, "chunking.tokens_per_wr": 1}, "finding", ("mori #625", "DeepEP #700"),
    wrong_stride=True,
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "geometry_index_fixed", "sender and receiver share one slot function",
    {**STRICT_SAME_QP, "chunking.tokens_per_wr": 1}, "clean", ("mori #625",),
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
