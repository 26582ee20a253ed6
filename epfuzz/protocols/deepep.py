"""DeepEP's own protocols: V2 hybrid dispatch before and after #674 (bug-zoo pattern 1), the
WRITE_WITH_IMM completion variant, and the whole dispatch family left to the fuzzer.

All four are the dispatch sender and receiver (`epfuzz.protocols.dispatch`) with fields pinned.
"""

from __future__ import annotations

from epfuzz.protocols.base import Pattern
from epfuzz.protocols.dispatch import DispatchProtocol

PATTERN = Pattern(1, "RO atomic signal overtakes RO data")

_DEEPEP = {"signal.kind": "faa", "signal.other_qp": False, "signal.fence": False,
           "signal.encoding": "pack2", "signal.at_end_only": False}

DEEPEP_V2_DISPATCH = DispatchProtocol(
    "deepep_v2_dispatch",
    "DeepEP V2 hybrid dispatch before #674: window registered with relaxed ordering, per-channel tail "
    "raised by fetch-and-add (VA signal, pack2(finish, tail)) every update_interval tokens on the data QP",
    {**_DEEPEP, "knobs.mr_relaxed": True}, "finding", ("DeepEP #661", "DeepEP #674", "nccl#2210"),
    pattern=PATTERN)
DEEPEP_V2_DISPATCH_FIXED = DispatchProtocol(
    "deepep_v2_dispatch_fixed",
    "DeepEP V2 hybrid dispatch after #674: the same, window registered NCCL_WIN_STRICT_ORDERING",
    {**_DEEPEP, "knobs.mr_relaxed": False}, "clean", ("DeepEP #674",),
    pattern=PATTERN)
WRITE_IMM_SIGNAL = DispatchProtocol(
    "write_imm_signal",
    "completion by RDMA WRITE_WITH_IMM on the data QP: the receiver trusts the CQE, which IB orders "
    "after the QP's earlier data",
    {"signal.kind": "write_imm", "signal.other_qp": False}, "clean", ("IB spec C9-? / o9-20",))
DISPATCH_ANY = DispatchProtocol(
    "dispatch_any",
    "the dispatch family with every signal and MR knob left to the fuzzer (litmus space for the safety "
    "table: signal kind x placement x fence x MR ordering)",
    {}, "finding", ("research notes: ten bug patterns",))

PROTOCOLS = (DEEPEP_V2_DISPATCH, DEEPEP_V2_DISPATCH_FIXED, WRITE_IMM_SIGNAL, DISPATCH_ANY)
