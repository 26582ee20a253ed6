"""The copy-engine batch layer: what a batch of copy-engine copies is ordered with (issue 30, point 2).

NCCL's zero-SM RMA path puts a put's data copies and its 8-byte signal copies into one batched memcpy
(`ncclCeLaunchBatchOps`, a `cudaMemcpyBatchAsync`), and "batched mem copy does not guarantee order of
execution" (NCCL 9b6a9db2, field note N3): the signal copy may land before the data copy, and two
signal copies to the same peer slot in one batch may land in either order, so a later sequence number
can be overwritten by an earlier one. The fix puts data and signals in separate batches, at most one
task per peer slot per batch. The model's clauses (`ops.CeCopy`, `ops.CeValue`), each tested in
`tests/rules/test_cebatch_rules.py`:

- `CE-batch`: copies of one batch on one lane may become visible in any order.
- `CE-stream`: a later batch on the lane is issued once the earlier one has completed (stream order),
  so none of its copies passes one of the earlier batch's.
- `CE-lanes`: copies on different lanes (streams) are unordered (the model's `xQP`).
- `CE-no-fabric`: a copy engine's copies cross no network: adaptive routing reorders none of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CeClause:
    name: str
    source: str
    meaning: str


CE_CLAUSES: dict[str, CeClause] = {c.name: c for c in (
    CeClause("CE-batch", "NCCL 9b6a9db2 src/rma/rma_ce.cc: \"batched mem copy does not guarantee order of execution\"",
             "copies of one batch on one lane become visible in any order (data after its signal; two signals "
             "to one slot either way round)"),
    CeClause("CE-stream", "CUDA stream semantics: work in one stream runs in issue order; NCCL 9b6a9db2's fix "
             "(a data batch, then a signal batch)",
             "a later batch's copies never pass an earlier batch's on the same lane"),
    CeClause("CE-lanes", "CUDA: no order between streams", "copies on different lanes are unordered (xQP)"),
    CeClause("CE-no-fabric", "a copy engine writes over NVLink/PCIe, not a routed fabric",
             "adaptive routing reorders no copy-engine packet"),
)}

#: the rule name the pass rule reports for a pass inside one batch
CE_BATCH = "CE-batch"
