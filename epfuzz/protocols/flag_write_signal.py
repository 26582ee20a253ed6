"""Bug-zoo pattern 2: flag written with RDMA WRITE after the data.

`flag_write_signal` is the bug as shipped (the tail raised by an RDMA WRITE of a flag after the
data, on an RO MR), `flag_write_signal_fixed` the fix as shipped. Both are the dispatch sender and
receiver (`epfuzz.protocols.dispatch`) with fields pinned; `sources` on each names the issues and
commits they reproduce.
"""

from __future__ import annotations

from epfuzz.protocols.base import Pattern
from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol

PATTERN = Pattern(2, "flag written with RDMA WRITE after the data")

BAD = DispatchProtocol(
    "flag_write_signal", "the tail is an RDMA WRITE of a flag after the data on an RO MR (DeepEP V1 before "
    "458cdcb): RO lets the flag's MemWr pass the data (A2b); adaptive routing lets its packet pass too",
    {"signal.kind": "write", "knobs.mr_relaxed": True, "signal.other_qp": False}, "finding",
    ("DeepEP #40", "DeepEP 458cdcb", "Mooncake #2542"),
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "flag_write_signal_fixed", "the tail raised by an atomic (nvshmemx_signal_op ADD) on a strict MR: "
    "executed in PSN order and not allowed past the data (C2a)",
    dict(STRICT_SAME_QP), "clean", ("DeepEP 458cdcb",),
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
