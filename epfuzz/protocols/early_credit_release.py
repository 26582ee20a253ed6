"""Bug-zoo pattern 8: receiver staging reused before it is consumed.

`early_credit_release` is the bug as shipped (the receiver's staging credit returned before the slot
is consumed), `early_credit_release_fixed` the fix as shipped. Both are the dispatch sender and
receiver (`epfuzz.protocols.dispatch`) with fields pinned; `sources` on each names the issues and
commits they reproduce.
"""

from __future__ import annotations

from epfuzz.protocols.base import Pattern
from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol

PATTERN = Pattern(8, "receiver staging reused before it is consumed")

BAD = DispatchProtocol(
    "early_credit_release", "the receiver returns a slot's credit when it accepts it, while it is still reading "
    "it (staging released before consumed): the next call's writes land on bytes being read",
    dict(STRICT_SAME_QP), "finding", ("DeepEP #621", "DeepEP #642", "nccl-extensions #8"),
    release_at_accept=True, poison=False,
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "early_credit_release_fixed", "the credit is returned only after the read (the fence before reuse)",
    dict(STRICT_SAME_QP), "clean", ("DeepEP #642",), release_at_accept=False, poison=False,
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
