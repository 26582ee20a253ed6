"""Bug-zoo pattern 9: completion seen before the data is visible, no flush.

`gdr_no_flush` is the bug as shipped (GPUDirect RDMA: the completion on another PCIe path than the
data, no flush), `gdr_no_flush_fixed` the fix as shipped. Both are the dispatch sender and receiver
(`epfuzz.protocols.dispatch`) with fields pinned; `sources` on each names the issues and commits
they reproduce.
"""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.protocols.base import Pattern
from epfuzz.protocols.dispatch import DispatchProtocol

PATTERN = Pattern(9, "completion seen before the data is visible, no flush")

_GDR_TARGETS = {ops.DATA: 1, ops.SIGNAL: 1, ops.CQ: 0, ops.RECV: 0}
BAD = DispatchProtocol(
    "gdr_no_flush", "GPUDirect RDMA: data goes to GPU memory, the completion to host memory; the consumer "
    "trusts the CQE without a flush, though the two paths are not ordered",
    {"knobs.mr_relaxed": False, "signal.kind": "write_imm", "signal.other_qp": False}, "finding",
    ("NVSHMEM #75", "NCCL #2439", "NCCL #2092"), targets=_GDR_TARGETS,
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "gdr_no_flush_fixed", "after the CQE, a flush (a read on the GPU path) before the data is consumed",
    {"knobs.mr_relaxed": False, "signal.kind": "write_imm", "signal.other_qp": False}, "clean",
    ("NVSHMEM #75",), targets=_GDR_TARGETS, flush_on_accept=True,
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
