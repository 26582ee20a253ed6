"""Which element may pass which: the rules the adversary (`epfuzz.sim.adversary`) checks.

`tlp_pass_rule` is the PCIe ordering table (`epfuzz.model.ordering`) plus what the
emulator adds around it at the root complex; `packet_pass_rule` is the network's
rule (in order per QP unless adaptive routing is on). A rule returns the name of
the clause that permits the pass, or None; that name is what findings report.
"""

from __future__ import annotations

from typing import Final

from epfuzz.core.native import mypyc_attr
from epfuzz.model.cebatch import CE_BATCH
from epfuzz.model.ordering import Attrs, passing_rule_name
from epfuzz.model.ordering import may_pass as _may_pass
from epfuzz.model.rdma_read import UNFENCED
from epfuzz.sim.adversary import PassRule
from epfuzz.sim.packets import A_ADD, A_FETCH, A_READ, LocalStore, Packet, Tlp
from epfuzz.sim.responder import RESPONDER_ATTRS


def tlp_pass_rule() -> PassRule:
    """May TLP `later` become visible before the earlier-arrived TLP `earlier`?

    Beyond the PCIe table (`epfuzz.model.ordering`): epochs are barriers; a receiver's
    own store at an epoch start is a barrier unless the protocol lets the next
    epoch race it ("no-barrier"); an RMW write never passes its read; an o9-20
    atomic never passes its QP's earlier TLPs; TLPs of different QPs are unordered
    (IB gives no cross-QP order, "xQP"); TLPs to different completers are
    unordered (PCIe ordering is per path, "path"). An RDMA READ's MemRd
    (`epfuzz.model.rdma_read`) is never passed by a WR fenced behind it
    ("IB-fence-read"); an unfenced later TLP of its QP may pass it ("IB-read-unfenced",
    where the table allows: A3 for a posted write). The TLP by which the responder executed a READ or an
    ATOMIC (the MemRd; in PCI atomic mode 4 the AtomicOp) is never passed by a WR its channel posted once
    that WR's response was back, a Flush's or a fence's wait ("IB-read-response", "IB-atomic-executed",
    `Tlp.acked`): that TLP's own cell (B2a, C2a/C2b) then decides what of the earlier data it covers.
    Copies of one copy-engine batch on one lane pass each other freely ("CE-batch"), a later batch never
    passes an earlier one (`epfuzz.model.cebatch`). The reorder window is applied by `apply_overtakes`,
    unit by unit.
    """
    table = _PairMemo()

    def rule(later: Tlp, earlier: Tlp) -> str | None:
        if later.epoch != earlier.epoch:          # epochs are separated by a barrier
            return None
        if earlier.local or later.local:          # the receiver's own stores at the epoch start
            return "no-barrier" if _UNORDERED in (earlier.local, later.local) else None
        if later.dep == earlier.seq:              # RMW write waits for its read's completion
            return None
        if later.hold and later.qp == earlier.qp:  # o9-20: atomic held for the QP's earlier writes
            return None
        ea = earlier.action
        if ea in (A_FETCH, A_READ) or (ea == A_ADD and earlier.dep < 0):  # a READ's or an ATOMIC's execution
            # TLP (its MemRd; mode 4: its AtomicOp; mode 0's write-back MemWr has a dep), which its response
            # waited for: a WR its channel posted once that response was back (a Flush's, a fence's) never passes it
            acked = later.acked
            if later.after == earlier.wr or later.fence_read == earlier.wr or (
                    earlier.qp < len(acked) and earlier.wr <= acked[earlier.qp]):
                return None  # IB-read-response, IB-fence-read, IB-atomic-executed
        if later.batch >= 0 and earlier.batch >= 0 and later.qp == earlier.qp:  # one copy-engine lane:
            return CE_BATCH if later.batch == earlier.batch else None  # no order in a batch, stream order across
        if later.qp != earlier.qp:                # IB: no ordering across QPs; the responder
            return "xQP"                          # processes them independently
        if later.target != earlier.target:        # PCIe orders a path, not different completers
            return "path"
        if earlier.action == A_FETCH:              # a later WR of the QP, not fenced behind the READ
            return UNFENCED if table.rule(later.attrs, earlier.attrs) is not None else None
        return table.rule(later.attrs, earlier.attrs)

    return rule


#: the PCIe table's verdict per (later, earlier) Attrs pair, keyed by identity (the responder shares Attrs
#: objects); each entry keeps its pair alive and is checked by `is`, so a reused id cannot alias. Filled
#: at import for the responder's Attrs, so that runs take no cache-miss path
_TABLE: dict[tuple[int, int], tuple[Attrs, Attrs, str | None]] = {
    (id(a), id(b)): (a, b, passing_rule_name(a, b) if _may_pass(a, b) else None)
    for a in RESPONDER_ATTRS for b in RESPONDER_ATTRS}


def _table_rule(a: Attrs, b: Attrs) -> str | None:
    """`passing_rule_name` if the ordering table lets `a` pass `b`, else None: computed once per pair."""
    hit = _TABLE.get((id(a), id(b)))
    if hit is not None and hit[0] is a and hit[1] is b:
        return hit[2]
    return passing_rule_name(a, b) if _may_pass(a, b) else None  # Attrs made elsewhere (tests, explore)


@mypyc_attr(acyclic=True)  # untracked by the cycle collector: see `packets.Packet`
class _PairMemo:
    """`_table_rule` of the last (later, earlier) Attrs pair one rule was asked about, by identity.

    A move checks one passer against its neighbours in turn, and most TLPs share a few Attrs objects, so
    the pair mostly repeats; the table's own look-up builds an (id, id) key (two boxed ints and a tuple)
    and hashes it, ~1k instructions per pass checked (issue 31). Attrs are frozen: a pair's verdict never
    changes, and the memo holds the pair it answers for, so identity cannot alias."""

    def __init__(self) -> None:
        self.a: Attrs | None = None
        self.b: Attrs | None = None
        self.r: str | None = None

    def rule(self, a: Attrs, b: Attrs) -> str | None:
        if a is self.a and b is self.b:
            return self.r
        r = _table_rule(a, b)
        self.a, self.b, self.r = a, b, r
        return r


#: Final: mypyc keeps these in C statics, not looked up in the module's dict at every pass checked
_UNORDERED: Final = LocalStore.UNORDERED


def packet_pass_rule(adaptive_routing: bool) -> PassRule:
    """Adaptive routing lets a packet overtake earlier ones; without it the wire is FIFO per QP."""

    def rule(later: Packet, earlier: Packet) -> str | None:
        # every Packet carries after/fence_read/batch (-1 unless its WR set them: `Packet.__init__`), so
        # the issue-30 layers cost two compares here, not getattr lookups, when a scenario does not use them
        if not adaptive_routing or later.epoch != earlier.epoch:
            return None
        if later.batch >= 0 or earlier.batch >= 0:
            return None  # a copy engine's copies cross no fabric (CE-no-fabric)
        if known_arrived(later, earlier):
            return None
        return "AR" if later.qp == earlier.qp else "cross-QP"

    return rule


def known_arrived(later: Packet, earlier: Packet) -> bool:
    """Whether `later` was posted after its channel knew `earlier` had arrived: no route can then bring
    `later` in first. A READ's response needed every packet before the READ (stricter across QPs:
    IB-fence-read, IB-read-response); a Flush's completion (the ACK of the QP's last WR before it, or an
    atomic's response) needed every packet of that QP's WRs up to it (IB-ack, IB-sq-order). Adaptive
    routing let a flag that a Flush had held for its data's ACK pass that data (a protocol author's
    trial, 2026-12-04: a false alarm)."""
    after = later.after if later.after > later.fence_read else later.fence_read
    if after >= 0 and earlier.wr <= after:
        return True
    acked = later.acked
    return earlier.qp < len(acked) and earlier.wr <= acked[earlier.qp]
