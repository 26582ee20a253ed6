"""The RDMA READ layer: what a requester's READ of remote memory is ordered with (issue 30, point 2).

A READ is a request the responder NIC serves by reading its own memory: one PCIe MemRd (non-posted,
no data), whose completion data flows back as the READ response. So a READ is ordered with the
responder's other traffic by the PCIe table (`epfuzz.model.ordering`) and by IB's rules for the
QP's request stream. The model's clauses, each with the rule it rests on and its test in
`tests/rules/test_rdma_read_rules.py`:

- `B2a` (existing table cell): the MemRd must not pass the QP's earlier posted writes, RO or not:
  the READ sees every earlier WRITE of its QP. So a READ on the data QP, waited for, is a flush.
- `B2b` (existing table cell): with IDO and different requester IDs it may pass them. One QP has
  one requester ID in the model, so only a READ on another QP's function (`knobs.num_functions`)
  could, and across QPs `xQP` already allows it.
- `xQP` (existing model rule): a READ on another QP than the WRITEs is not ordered with them at
  all: it may read memory before they land (a READ "flush" on the wrong QP flushes nothing).
- `IB-read-unfenced`: a later WR of the same QP without the fence indicator may take effect at the
  responder before the READ has read memory (a write completes into the posted buffer faster than
  a read is served; PCIe A3: posted writes must be able to pass a read request).
- `IB-fence-read`: a WR with the fence indicator is not started until the QP's earlier READs and
  ATOMICs have completed (their responses are back), so its TLPs never pass the READ's MemRd.
- `IB-read-response` (a completion clause): a READ completes locally when its response is back:
  after the responder executed it, behind every earlier packet of its QP (PSN order).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReadClause:
    """One clause of the READ layer: its name (what findings and `explain` print), its source, its meaning."""

    name: str
    source: str
    meaning: str


READ_CLAUSES: dict[str, ReadClause] = {c.name: c for c in (
    ReadClause("B2a", "PCIe r5.0 2.4.1 Table 2-40 B2a",
               "a MemRd must not pass an earlier posted write (RO does not help a read): a READ sees every "
               "earlier WRITE of its QP"),
    ReadClause("B2b", "PCIe r5.0 2.4.1 Table 2-40 B2b",
               "with ID-based ordering and different requester IDs a MemRd may pass earlier posted writes"),
    ReadClause("xQP", "IBA vol. 1: no ordering between QPs (nccl#2302)",
               "a READ on another QP is not ordered with the WRITEs of the data QP: it may read before they land"),
    ReadClause("IB-read-unfenced", "IBA vol. 1 ch. 9 transaction ordering (RDMA READ relaxed ordering: a later "
               "SEND or RDMA WRITE may be executed before an earlier READ has read memory unless fenced); PCIe "
               "r5.0 Table 2-40 A3",
               "a later WR of the same QP without IBV_SEND_FENCE may become visible before the READ's MemRd"),
    ReadClause("IB-fence-read", "ibv_post_send(3) IBV_SEND_FENCE; IBA 10.8.3.3 (rxe fences on outstanding "
               "reads/atomics)",
               "a fenced WR starts once the QP's earlier READs have completed: its TLPs never pass the MemRd"),
    ReadClause("IB-read-response", "IBA vol. 1 ch. 9.7 (an RDMA READ completes when its response data is "
               "received)",
               "a READ completes when its response is back: a Flush after it waits for that"),
)}

#: the model rule names this layer adds to the pass rule (`epfuzz.sim.pass_rules`)
UNFENCED, FENCED = "IB-read-unfenced", "IB-fence-read"
