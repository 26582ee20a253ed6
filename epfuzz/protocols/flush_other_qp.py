"""Bug-zoo pattern 4: signal on another QP after only a local flush.

`flush_other_qp` is the bug as shipped (the signal on another QP after a flush that only waits for
local completion), `flush_other_qp_fixed` the fix as shipped. Both are the dispatch sender and
receiver (`epfuzz.protocols.dispatch`) with fields pinned; `sources` on each names the issues and
commits they reproduce.
"""

from __future__ import annotations

from epfuzz.protocols.base import Pattern
from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol

PATTERN = Pattern(4, "signal on another QP after only a local flush")

BAD = DispatchProtocol(
    "flush_other_qp", "data on the channel's QP, a flush (local completion only), then the signal on another "
    "QP (DeepEP V2 direct-mode gpu_barrier; nccl#2302): no order across QPs",
    {"knobs.mr_relaxed": False, "signal.kind": "faa", "signal.other_qp": True}, "finding",
    ("nccl#2302", "DeepEP gpu_barrier"), flush_before_signal=True,
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "flush_other_qp_fixed", "a strong signal on the same context (QP) as the puts, strict MR (NCCL >= 2.30.5)",
    dict(STRICT_SAME_QP), "clean", ("NCCL 2.30.5 strong signals",), flush_before_signal=True,
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
