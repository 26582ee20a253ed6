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
