"""PCIe transaction ordering: the rule table the emulator's adversary must obey.

Source: PCI Express Base Specification r5.0, section 2.4.1, Table 2-40 ("Ordering
Rules Summary"), as quoted in nccl#2210. Rows are the *later* TLP, columns the
*earlier* one; a cell says whether the later may become visible first.

  'No'  : must not pass (unless the cell's b-clause applies)
  'Y/N' : may pass, no requirement either way -> the adversary may choose it
  'Yes' : must be able to pass (deadlock avoidance) -> the adversary may choose it

The table below is data: each cell names its rule, gives its predicate, and is
pinned by its own test in tests/rules/test_ordering_table.py. Relaxed Ordering
(RO) and ID-based Ordering (IDO) are the attributes that turn a 'No' into a pass.

Per the research notes, C2b (AtomicOp passing a posted write) is allowed with RO
or IDO; B2b (read passing posted) only with IDO and different requester IDs: RO
does not help a read, which is why the mode-0 read-modify-write is safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum


class TlpType(IntEnum):
    POSTED = 0          # MemWr (RDMA WRITE payload, CQE, RMW write-back)
    READ = 1            # MemRd, non-posted without data (the RMW's read)
    NP_DATA = 2         # non-posted with data: AtomicOp (FetchAdd), PCI_ATOMIC_MODE=4
    COMPLETION = 3      # Cpl/CplD (flows back; in the table for completeness)


@dataclass(frozen=True)
class Attrs:
    """The ordering-relevant attributes of one TLP."""

    type: TlpType
    ro: bool = False
    ido: bool = False
    rid: int = 0           # requester ID (PCIe function)
    txn: int = -1          # transaction ID, for D5b (completions of one request)


def _ido_diff(later: Attrs, earlier: Attrs) -> bool:
    return later.ido and later.rid != earlier.rid


@dataclass(frozen=True)
class Cell:
    rule: str                       # e.g. "A2a/A2b"
    spec: str                       # No / Y/N / Yes, as printed in the table
    may_pass: Callable[[Attrs, Attrs], bool]
    why: str


def _never(later: Attrs, earlier: Attrs) -> bool:
    return False


def _always(later: Attrs, earlier: Attrs) -> bool:
    return True


P, R, N, C = TlpType.POSTED, TlpType.READ, TlpType.NP_DATA, TlpType.COMPLETION

#: (later, earlier) -> Cell. The whole of Table 2-40 for the four TLP classes.
RULES: dict[tuple[TlpType, TlpType], Cell] = {
    (P, P): Cell("A2a/A2b", "a) No b) Y/N",
                 lambda l, e: l.ro or _ido_diff(l, e),
                 "posted must not pass posted, unless the later has RO (A2b) or IDO with different IDs"),
    (P, R): Cell("A3", "Yes", _always, "posted must be able to pass a read request"),
    (P, N): Cell("A4", "Yes", _always, "posted must be able to pass a non-posted request with data"),
    (P, C): Cell("A5a/A5b", "a) Y/N b) Yes", _always, "posted may pass a completion"),
    (R, P): Cell("B2a/B2b", "a) No b) Y/N", _ido_diff,
                 "a read must not pass posted, unless IDO with different IDs (RO does not help)"),
    (R, R): Cell("B3", "Y/N", _always, "reads may pass reads"),
    (R, N): Cell("B4", "Y/N", _always, "a read may pass a non-posted request with data"),
    (R, C): Cell("B5", "Y/N", _always, "a read may pass a completion"),
    (N, P): Cell("C2a/C2b", "a) No b) Y/N", lambda l, e: l.ro or _ido_diff(l, e),
                 "an AtomicOp must not pass posted, unless RO or IDO with different IDs (nccl#2210)"),
    (N, R): Cell("C3", "Y/N", _always, "non-posted with data may pass a read"),
    (N, N): Cell("C4", "Y/N", _always, "non-posted may pass non-posted"),
    (N, C): Cell("C5", "Y/N", _always, "non-posted may pass a completion"),
    (C, P): Cell("D2a/D2b", "a) No b) Y/N", lambda l, e: l.ro or _ido_diff(l, e),
                 "a completion must not pass posted, unless RO or IDO with different IDs"),
    (C, R): Cell("D3", "Yes", _always, "a completion must be able to pass a read request"),
    (C, N): Cell("D4", "Yes", _always, "a completion must be able to pass non-posted with data"),
    (C, C): Cell("D5a/D5b", "a) Y/N b) No", lambda l, e: l.txn < 0 or l.txn != e.txn,
                 "completions may pass completions, except those of the same transaction ID"),
}


def may_pass(later: Attrs, earlier: Attrs) -> bool:
    return RULES[(later.type, earlier.type)].may_pass(later, earlier)


def cell_for(later: Attrs, earlier: Attrs) -> Cell:
    return RULES[(later.type, earlier.type)]


def passing_rule_name(later: Attrs, earlier: Attrs) -> str:
    """The single rule clause that let `later` pass `earlier` ("C2b", "A2b", "A4"...)."""
    cell = cell_for(later, earlier)
    if "/" in cell.rule and cell.spec.startswith("a) No"):
        return cell.rule.split("/")[1]
    return cell.rule.split("/")[0]


# ---------------------------------------------------------------- NVLink (the `nvlink` preset)
#
# GPU stores into a peer GPU's memory are not TLPs through a root complex; what orders them is the PTX
# memory model (PTX ISA 8.x, "Memory Consistency Model": weak vs. strong operations, scopes .cta/.gpu/.sys,
# fence.sc / fence.acq_rel, st.release, atom relaxed by default). The `nvlink` preset maps each sender op
# to one GPU access and asks `nvlink_pass` instead of Table 2-40. Each clause names the PTX rule and the
# project's measurement on the H200 pair (docs/backends.md, bench/cuda/litmus.jsonl).


class GpuAccess(IntEnum):
    STORE = 0      # st / st.volatile: payload, flags, the stores a NIC would make into CQ/recv
    ATOMIC = 1     # atom.add.sys (atomicAdd_system): relaxed unless fenced


NO_PROXY_FENCE = 1 << 30  # GpuOp.fenced / Wr.proxy_fence of a store no ProxyFence follows


@dataclass(frozen=True)
class GpuOp:
    """One access of the sender as the GPU issues it; `clause` says whether it is an ordering point."""

    access: GpuAccess
    clause: str = "NV-weak"
    cta: int = 0
    tma: bool = False          # a TMA bulk store (the async proxy)
    index: int = 0             # its op's index in the channel's program
    fenced: int = NO_PROXY_FENCE  # the index of the channel's first ProxyFence after it


@dataclass(frozen=True)
class NvClause:
    name: str
    may_pass: bool
    ptx: str
    measured: str


NVLINK_CLAUSES: dict[str, NvClause] = {c.name: c for c in (
    NvClause("NV-cta", True, "no causality order between accesses of different CTAs without a "
             "synchronizes-with (morally strong release/acquire pair) between them",
             "shared_counter: another channel's add satisfies a channel's wait before its own data"),
    NvClause("NV-weak", True, "weak (st, st.volatile) stores are not morally strong: program order does not "
             "order them for an observer on another GPU",
             "64K-word flag, plain store, p2p, no fence: 256 of 2,000 rounds (gpu-path.md); 3 in 100k"),
    NvClause("NV-relaxed-atomic", True, "atom without .release has .relaxed semantics: no order with the "
             "thread's earlier weak stores", "slot faa, p2p, no fence, 7 stress CTAs: 7,628 in 100k"),
    NvClause("NV-gpu-scope", True, "fence.sc.gpu / fence.acq_rel.gpu (__threadfence) orders only for "
             "observers within the GPU scope; the consumer on the peer GPU is outside it",
             "64K-word flag, p2p, __threadfence: 1 in 1M, twice"),
    NvClause("NV-fence-sys", False, "fence.sc.sys (__threadfence_system) before the signal: with bar.sync "
             "cumulativity every earlier store of the CTA is ordered before it at system scope",
             "p2p, __threadfence_system: 0 in 1M (flag and faa rows)"),
    NvClause("NV-release-sys", False, "st.release.sys: a release store orders the thread's (with bar.sync, "
             "the CTA's) earlier stores before it at system scope",
             "p2p, st.release.sys, 7 stress CTAs: 0 in 1M"),
    NvClause("NV-async-proxy", True, "TMA bulk stores (cp.async.bulk) are async-proxy operations: a generic-proxy "
             "release or fence (red.release.sys, fence.sc.sys) does not order them; only fence.proxy.async after "
             "their completion (cp.async.bulk.wait_group) brings them into the generic proxy's order",
             "one H200, same GPU, 2 shapes x 0/7 stress CTAs: 0 in 400k (the window never showed; bench/cuda/"
             "tma-cells.jsonl); NCCL 3f29db27, hybrid_ep dispatch/combine flags before TMA data"),
    NvClause("NV-proxy-fenced", False, "fence.proxy.async after cp.async.bulk.wait_group 0 on the issuing thread: "
             "the TMA stores are ordered before its later generic-proxy accesses, so the signal's own clause "
             "decides (NCCL 3f29db27's fix)",
             "one H200, same GPU, tma_flag_fixed: 0 in 400k (bench/cuda/tma-cells.jsonl)"),
    NvClause("NV-fence-gpu-same", False, "__threadfence orders for an observer on the same GPU (GPU scope)",
             "same GPU, __threadfence: 0 in 1M"),
)}


#: the `mixed-nvlink-rdma` preset (model "mixed"): what an RDMA-plane signal orders of the NVLink-plane stores of
#: the same sender (DeepEP #715); pinned by tests/rules/test_nvlink_rules.py
MIX_CLAUSES: dict[str, NvClause] = {c.name: c for c in (
    NvClause("MIX-device-scope", True, "a release at cuda::thread_scope_device (fence.acq_rel.gpu) orders the "
             "GPU's stores for observers in the GPU scope, which the local NIC reading local memory is; a store "
             "landing in a peer GPU over NVLink is outside it (DeepEP #715: the GIN signal() default scope)",
             "not measured here (#715 was not reproduced in a unit test upstream either)"),
    NvClause("MIX-fence-sys", False, "fence.acq_rel.sys after the TMA stores completed (#715's fix, when "
             "!kIsScaleupNVLink): the NVLink stores are ordered before the RDMA-plane signal at system scope",
             "not measured here: DeepEP #715"),
)}


def mixed_pass(nvlink_earlier: bool, rdma_later: bool, fence: str) -> str | None:
    """Under `mixed-nvlink-rdma`: may an RDMA-plane TLP become visible before the same sender's earlier NVLink
    store? Only a system-scope fence orders them; None also when the pair is not across the planes that way."""
    if not (nvlink_earlier and rdma_later):
        return None
    return None if fence == "threadfence_system" else "MIX-device-scope"


def gpu_signal_clause(access: GpuAccess, fence: str, store: str, path: str) -> str:
    """The clause that decides whether a signal access is an ordering point, from the scenario's `gpu` fields.

    `fence` is what the sender issues before each signal (and at each Flush); `store` how a flag store is
    made; `path` where the consumer is (p2p: the peer GPU, same: this GPU, host: host memory).
    """
    if fence == "threadfence_system":
        return "NV-fence-sys"
    if access == GpuAccess.STORE and store == "release_sys":
        return "NV-release-sys"
    if fence == "threadfence":
        return "NV-fence-gpu-same" if path == "same" else "NV-gpu-scope"
    return "NV-weak" if access == GpuAccess.STORE else "NV-relaxed-atomic"


def nvlink_pass(later: GpuOp, earlier: GpuOp) -> str | None:
    """May `later` become visible to the peer before `earlier` (issued first)? The clause, or None."""
    if later.cta != earlier.cta:
        return "NV-cta"
    if NVLINK_CLAUSES[later.clause].may_pass:
        return later.clause
    if earlier.tma and not later.tma and earlier.fenced > later.index:  # no ProxyFence between them
        return "NV-async-proxy"
    return None


# ---------------------------------------------------------------- completions (what a Flush and a fence wait for)
#
# A `Flush` (NCCL gin.flush, NVSHMEM quiet on one context) waits for the *local* completion of the WRs posted
# before it on its QP; IBV_SEND_FENCE makes the NIC wait for the QP's earlier READ/ATOMIC completions. When a
# completion happens is the IB RC requester's rule, not the GPU's: the requester reports a WR complete only once
# the responder's acknowledgement of it is back, and the request packets reach the responder only after the
# port and the wire they waited in. Each clause is pinned by a test in tests/rules/test_completion_rules.py.


@dataclass(frozen=True)
class CompletionClause:
    name: str
    source: str
    rule: str


COMPLETION_CLAUSES: dict[str, CompletionClause] = {c.name: c for c in (
    CompletionClause("IB-ack", "IBA vol. 1 ch. 9.7 (RC requester: a SEND or RDMA WRITE completes when the ACK "
                     "of its last request packet is received)",
                     "an RDMA WRITE, WRITE_WITH_IMM or SEND completes locally when the ACK of its last packet is "
                     "back: that packet's arrival at the responder (after the port queue and the wire) plus the "
                     "way back"),
    CompletionClause("IB-atomic-response", "IBA vol. 1 ch. 9.7 (an ATOMIC completes when its atomic response is "
                     "received); o9-20: the responder executes it in PSN order",
                     "a FETCH_AND_ADD completes when its response is back: after the responder executed it, "
                     "behind every earlier packet of the QP"),
    CompletionClause("IB-atomic-executed", "IBA vol. 1 ch. 9.7 (the atomic response carries the value the "
                     "responder fetched: it executed the ATOMIC first); PCIe r5.0 Table 2-40 B2a (mode 0: its MemRd "
                     "passes no earlier posted write), C2a (mode 4: its AtomicOp passes none unless RO/IDO, C2b); "
                     "research anchors C: atomic completion implies earlier writes complete (DeepEP #83)",
                     "a WR its channel posts after a Flush or IBV_SEND_FENCE that waited for an ATOMIC's response "
                     "never becomes visible before that atomic's execution TLP (its MemRd in PCI atomic mode 0, "
                     "its AtomicOp in mode 4), on any QP: it is behind every earlier write that TLP could not "
                     "pass, and only those (an RO AtomicOp passing RO data, C2b, still lets it pass the data)"),
    CompletionClause("IB-sq-order", "ibv_poll_cq(3): a work completion means the WR and every outstanding "
                     "unsignaled WR posted before it on the work queue have completed",
                     "a QP's WRs complete in post order, so a Flush waits for the last WR posted on its QP "
                     "before it (by any channel), and that covers every earlier one"),
    CompletionClause("IB-flush-qp", "IBA: no ordering between QPs (nccl#2302)",
                     "a Flush waits for its own QP only: other QPs' WRs, before or after it, are not waited for"),
    CompletionClause("IB-local-only", "NCCL docs: gin.flush is local completion only; research notes, patterns "
                     "4 and 9",
                     "a WRITE's local completion says the responder NIC has the bytes, not that they are visible "
                     "in its memory: a WR posted after a Flush on another QP may still become visible first (xQP); "
                     "a READ's or ATOMIC's completion needed its execution (IB-read-response, IB-atomic-executed)"),
    CompletionClause("IB-fence", "ibv_post_send(3) IBV_SEND_FENCE: wait for prior RDMA READ and ATOMIC WRs of "
                     "the QP to complete",
                     "a fenced WR starts once the QP's earlier ATOMICs have completed (their responses are back, "
                     "port queue included); earlier WRITEs are not waited for"),
    CompletionClause("quiet-stale-frontier", "mori #404 (ShmemQuietThread drained to a snapshot: a warp returned "
                     "before its own WQEs completed); DeepEP #677 follow-up 5c4f2b8 (quiet read tx_wq.prod_idx, "
                     "which the posting path no longer advanced: the drain is a no-op)",
                     "a quiet on a stale frontier (`Flush(stale=True)`) waits only for the WRs posted on its QP "
                     "before the channel's own first WR there: none of its own (with one channel: nothing)"),
)}
