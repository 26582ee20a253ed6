"""Bug-zoo pattern 7: signal-word reset racing the next epoch's signal.

`signal_reset_race` is the bug as shipped (the receiver's reset of its tail words racing the next
epoch's signals), `signal_reset_race_fixed` the fix as shipped. Both are the dispatch sender and
receiver (`epfuzz.protocols.dispatch`) with fields pinned; `sources` on each names the issues and
commits they reproduce.
"""

from __future__ import annotations

from epfuzz.protocols.base import Pattern
from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol

PATTERN = Pattern(7, "signal-word reset racing the next epoch's signal")

BAD = DispatchProtocol(
    "signal_reset_race", "the receiver resets its tail words with a plain store after a call, with no barrier "
    "before the sender's next signals: the reset can land after them and erase them (hang)",
    dict(STRICT_SAME_QP), "finding", ("UCCL-EP #993", "rocm-systems #11569"),
    reset_signals=False, prologue_reset=False,
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "signal_reset_race_fixed", "the reset is ordered before the barrier that releases the next call",
    dict(STRICT_SAME_QP), "clean", ("UCCL-EP #993",), reset_signals=False, prologue_reset=True,
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
