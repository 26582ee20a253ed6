"""Bug-zoo pattern 6: stale-epoch slot reuse.

`stale_epoch_counter` is the bug as shipped (tail counters that are never reset, compared with this
epoch's count), `stale_epoch_counter_fixed` the fix as shipped. Both are the dispatch sender and
receiver (`epfuzz.protocols.dispatch`) with fields pinned; `sources` on each names the issues and
commits they reproduce.
"""

from __future__ import annotations

from epfuzz.protocols.base import Pattern
from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol

PATTERN = Pattern(6, "stale-epoch slot reuse")

BAD = DispatchProtocol(
    "stale_epoch_counter", "tail counters are never reset and the receiver compares them with this epoch's "
    "count: from the second call on, last call's value says 'ready' (identical payloads hide it)",
    dict(STRICT_SAME_QP), "finding", ("UCCL-EP #903",), reset_signals=False,
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "stale_epoch_counter_fixed", "monotonic counters: the receiver subtracts what earlier epochs added",
    dict(STRICT_SAME_QP), "clean", ("UCCL-EP #903",), reset_signals=False, receiver_opts={"epoch_base": True},
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
