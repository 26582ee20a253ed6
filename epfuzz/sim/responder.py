"""Responder NIC: packets in arrival order to TLPs in root-complex arrival order.

Payload becomes posted MemWr TLPs split at max-payload-size boundaries, carrying
RO when the MR and the NIC allow it. A FETCH_AND_ADD becomes one AtomicOp
(non-posted with data, PCI_ATOMIC_MODE=4) or a MemRd followed, after its
completion, by a MemWr (mode 0). Atomics and CQEs (WRITE_WITH_IMM, SEND; strict
MemWr TLPs) and RDMA READs (one MemRd, `epfuzz.model.rdma_read`) are executed only
once every earlier packet of the QP has arrived:
the responder executes requests in PSN order, and only RDMA WRITE payload may be
placed out of order under adaptive routing. With o9-20 enforced, an atomic
additionally must not pass the QP's earlier TLPs at PCIe (`Tlp.hold`, applied by
`epfuzz.sim.pass_rules.tlp_pass_rule`).
"""

from __future__ import annotations

from typing import Final

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import ops
from epfuzz.ir.presets import PRESETS, model_of
from epfuzz.ir.scenario import Scenario
from epfuzz.model.device import RO_ONLY_MODEL, mr_relaxed, tlp_ro
from epfuzz.model.ordering import Attrs, TlpType
from epfuzz.sim.packets import (
    A_ADD,
    A_COPY,
    A_CQE,
    A_FETCH,
    A_READ,
    A_STALE,
    A_VALUE,
    P_ATOMIC,
    P_IMM,
    P_READ,
    P_SEND,
    P_VALUE,
    P_WRITE,
    LocalStore,
    Packet,
    Tlp,
    TlpAction,
)

#: a receiver store before an epoch's traffic: (region, offset, u64 value, ordered behind a barrier)
LocalStoreSpec = tuple[str, int, int, bool]

# the packet kinds and TLP actions are bound once in `packets` (P_*, A_*): on Python 3.11 every `X.Y` of an
# enum goes through EnumType.__getattr__'s slow attribute hook (~0.15 us), which the responder would pay per
# packet (Final: mypyc keeps them in C statics, where a plain module global is a dict lookup per use)
_NONE: Final = LocalStore.NONE
#: the TLP types the responder emits, by the index `Responder.emit` takes (an int, so that its per-run
#: Attrs table is a list index, not a tuple key hashed per TLP)
_TYPES: Final = (TlpType.POSTED, TlpType.READ, TlpType.NP_DATA)
T_POSTED: Final = 0
T_READ: Final = 1
T_NP_DATA: Final = 2
#: Attrs are frozen values: one object per (type, RO, IDO, requester ID) for every run, made at import so
#: that no run takes a cache-miss path
_ATTRS: dict[tuple[TlpType, bool, bool, int], Attrs] = {
    (tp, ro, ido, rid): Attrs(tp, ro=ro, ido=ido, rid=rid)
    for tp in TlpType for ro in (False, True) for ido in (False, True) for rid in (0, 1)}
_LOCAL_ATTRS: Final = _ATTRS[(TlpType.POSTED, False, False, 0)]
#: the same objects by ((index in `_TYPES` * 2 + RO) * 2 + IDO) * 2 + requester ID, for runs of at most two
#: requester IDs (`Knobs.num_functions`): what `emit` reads per TLP. A per-run table filled through `attrs`
#: hashed a tuple with an enum member in it (Enum's `__hash__` is interpreted) per entry, ~3k a fresh scenario
_BY_INDEX: Final[list[Attrs]] = [_ATTRS[(tp, ro, ido, rid)] for tp in _TYPES for ro in (False, True)
                                 for ido in (False, True) for rid in (0, 1)]
#: every Attrs object the responder hands out (the adversary's pass table is precomputed over these)
RESPONDER_ATTRS: tuple[Attrs, ...] = tuple(_ATTRS.values())


#: every preset's ordering model, read off `epfuzz.ir.presets.model_of` (the one source) at import: a fresh
#: scenario asks four times (the responder's RO, the arrival's and the receiver's NVLink test, the pass rule),
#: and each call of `model_of` from compiled code is an interpreted frame (issue 31); Final: a C static
_MODELS: Final[dict[str, str]] = {name: model_of(name) for name in PRESETS}


#: whether the responder's TLPs carry RO (`device.tlp_ro` of the MR's `device.mr_relaxed`, no strong fence), by
#: 4 if the MR asks for RO + 2 if the preset's model is RO-only + 1 if the NIC sets RO (two interpreted calls a run)
_RO: Final[list[bool]] = [tlp_ro(mr_relaxed(bool(i & 4), bool(i & 2))[0], bool(i & 1), False) for i in range(8)]


def preset_model(preset: str) -> str:
    """`model_of(preset)`, from the table made of it; a name no preset has is asked of `model_of` itself.
    tests/sim/test_built_form.py holds the two equal for every preset and an unknown name."""
    m = _MODELS.get(preset)
    return model_of(preset) if m is None else m


@mypyc_attr(acyclic=True)  # untracked by the cycle collector: see `packets.Packet`
class Responder:
    """One responder NIC for one run: turns each arriving packet into TLPs, in order.

    `targets` maps regions to PCIe completers (0 = the default path); `prologue`
    gives, per epoch, the receiver's own stores that precede the epoch's traffic.
    """

    def __init__(self, scn: Scenario, layout_max_signals: int, tlp_base: int,
                 targets: dict[str, int] | None = None,
                 prologue: dict[int, list[LocalStoreSpec]] | None = None) -> None:
        k = scn.knobs
        self.targets = targets or {}
        self.prologue = prologue or {}
        self.max_signals = layout_max_signals
        self.mps = scn.chunking.max_payload
        self.ro = _RO[(4 if k.mr_relaxed else 0) + (2 if preset_model(scn.preset) == RO_ONLY_MODEL else 0)
                      + (1 if k.nic_relaxed_ordering else 0)]
        self.nf = k.num_functions
        self.ido = k.ido
        self.o920 = k.hca_o920
        self.atomic_op = k.atomic_mode == 4
        self.next_seq = tlp_base
        self.out: list[Tlp] = []
        self._attrs: dict[tuple[TlpType, bool, int], Attrs] = {}
        #: `_BY_INDEX`'s offset of this run's IDO, where its requester IDs are 0 and 1 (else -1: `attrs`)
        self.ido_at = (2 if k.ido else 0) if self.nf <= 2 else -1
        # per-QP in-order execution, indexed by QP (`run` sizes them): PSNs arrived, lowest PSN not yet
        # arrived, packets waiting for it
        self.arrived: list[set[int] | None] = []
        self.low: list[int] = []
        self.held: list[list[Packet]] = []

    def run(self, arrivals: list[Packet]) -> list[Tlp]:
        """All TLPs of `arrivals` (packets in arrival order), the epochs' local stores first."""
        nq = 0
        for p in arrivals:
            if p.qp >= nq:
                nq = p.qp + 1
        low = self.low = [-1] * nq  # PSNs are >= 0: -1 is "no packet of the QP"
        for p in arrivals:
            if low[p.qp] < 0 or p.psn < low[p.qp]:
                low[p.qp] = p.psn
        arrived: list[set[int] | None] = [None] * nq
        held: list[list[Packet]] = [[] for _ in range(nq)]
        self.arrived, self.held = arrived, held
        epoch = -1
        for p in arrivals:  # direct calls: a bound method in a local is a Python-level call under mypyc
            if p.epoch != epoch:
                epoch = p.epoch
                self.local_stores(epoch)
            q, psn = p.qp, p.psn
            if psn == low[q] and arrived[q] is None and not held[q]:
                # the QP's next PSN, none after it arrived, none held: what `execute_in_order` would do, at once
                # (a packet that executes in order executes now, without a pass through the held list)
                low[q] = psn + 1
                if self.place(p):
                    self.complete(p)
            else:
                self.receive(p)
                self.execute_in_order(q, psn)
        return self.out

    def attrs(self, tp: TlpType, ro: bool, qp: int) -> Attrs:
        """Shared attribute objects: one per (type, RO, requester ID) in this run, one per value ever."""
        key = (tp, ro, qp % self.nf)
        a = self._attrs.get(key)
        if a is None:
            full = (tp, ro, self.ido, qp % self.nf)
            a = _ATTRS.get(full)
            if a is None:
                a = _ATTRS[full] = Attrs(tp, ro=ro, ido=self.ido, rid=qp % self.nf)
            self._attrs[key] = a
        return a

    def new_tlp(self, epoch: int, attrs: Attrs, action: TlpAction, qp: int, region: str, off: int,
                length: int, value: int, n: int = 1, dep: int = -1, hold: bool = False, pkt: int = -1,
                wr: int = -1, local: LocalStore = LocalStore.NONE) -> Tlp:
        """Append a run of `n` TLPs at the next arrival index: the one place a TLP is built."""
        t = Tlp()
        t.seq, t.n, t.mps = self.next_seq, n, self.mps
        self.next_seq += n
        t.epoch, t.attrs, t.action, t.qp = epoch, attrs, action, qp
        t.region, t.off, t.length, t.value = region, off, length, value
        t.dep, t.hold, t.pkt, t.wr = dep, hold, pkt, wr
        t.target, t.local = self.targets.get(region, 0), local
        self.out.append(t)
        return t

    def emit(self, ti: int, ro: bool, action: TlpAction, p: Packet, region: str, off: int, length: int,
             value: int, n: int = 1, dep: int = -1, hold: bool = False) -> Tlp:
        """A TLP run of type `_TYPES[ti]` made for packet `p`: `new_tlp` inlined, as this runs once per packet."""
        qp = p.qp
        at = self.ido_at
        a = _BY_INDEX[(ti * 2 + ro) * 4 + at + qp % self.nf] if at >= 0 else self.attrs(_TYPES[ti], ro, qp)
        t = Tlp()
        t.seq, t.n, t.mps = self.next_seq, n, self.mps
        self.next_seq += n
        t.epoch, t.attrs, t.action, t.qp = p.epoch, a, action, qp
        t.region, t.off, t.length, t.value = region, off, length, value
        t.dep, t.hold, t.pkt, t.wr = dep, hold, p.seq, p.wr
        # most protocols route nothing elsewhere: no dict look-up per TLP then
        t.target, t.local = self.targets.get(region, 0) if self.targets else 0, _NONE
        t.after, t.fence_read, t.batch, t.acked = p.after, p.fence_read, p.batch, p.acked
        self.out.append(t)
        return t

    def local_stores(self, epoch: int) -> None:
        """The receiver's own stores before `epoch`'s traffic: behind a barrier, or racing it."""
        for region, off, value, ordered in self.prologue.get(epoch, ()):
            self.new_tlp(epoch, _LOCAL_ATTRS, A_VALUE, -1, region, off, 8, value,
                         local=LocalStore.BARRIER if ordered else LocalStore.UNORDERED)

    def receive(self, p: Packet) -> None:
        """Place what may be placed at arrival; hold what must wait for the QP's earlier PSNs."""
        if self.place(p):
            self.held[p.qp].append(p)

    def place(self, p: Packet) -> bool:
        """Place what may be placed at arrival; whether `p` also executes in PSN order (`complete`)."""
        kind = p.kind
        if kind == P_WRITE:
            self.payload(p, A_STALE if p.stale else A_COPY, p.value)
        elif kind == P_VALUE:
            self.payload(p, A_VALUE, p.value)
        elif kind in (P_ATOMIC, P_READ):  # executed in PSN order, even when writes are placed out of order
            return True
        elif kind == P_IMM:
            if p.length:
                self.payload(p, A_STALE if p.stale else A_COPY, 0)  # the value is the immediate, not a shift
            return p.last
        elif kind == P_SEND:  # the message lands in the posting channel's entry `slot`, where its CQE goes
            self.emit(T_POSTED, self.ro, A_VALUE, p, ops.RECV, (p.channel * self.max_signals + p.cq_slot) * 16,
                      8, p.value)
            return True
        return False

    def payload(self, p: Packet, action: TlpAction, value: int) -> None:
        """MemWr TLPs split at max-payload-size address boundaries, as one run."""
        if not p.length:
            return
        mps = self.mps
        n = (p.off + p.length - 1) // mps - p.off // mps + 1
        last = self.out[-1] if self.out else None
        if (action == A_COPY and last is not None and last.action == A_COPY
                and last.wr == p.wr and last.value == value and last.local == _NONE
                and last.off + last.length == p.off and p.off % mps == 0):
            last.n += n        # the next packet of the same WR, right behind: extend the run
            last.length += p.length
            self.next_seq += n
            return
        self.emit(T_POSTED, self.ro and not p.strong, action, p, p.region, p.off, p.length, value, n)

    def execute_in_order(self, qp: int, psn: int) -> None:
        """Record `psn` as arrived; execute the held packets every earlier PSN of the QP has reached.

        `low[qp]` is the lowest PSN not yet arrived, so only the arrival of exactly that PSN
        moves it (and with it what may execute); a later PSN is only remembered.
        """
        lo = self.low[qp]
        if psn != lo:
            s = self.arrived[qp]
            if s is None:
                s = self.arrived[qp] = set()
            s.add(psn)
            return
        lo += 1
        s = self.arrived[qp]
        if s:
            while lo in s:
                lo += 1
        self.low[qp] = lo
        held = self.held[qp]
        if held:
            keep: list[Packet] = []
            for h in held:
                if h.psn < lo:
                    self.complete(h)
                else:
                    keep.append(h)
            self.held[qp] = keep

    def complete(self, p: Packet) -> None:
        """The in-order completion point of packet p (CQE, an RDMA READ's MemRd, or an o9-20 atomic)."""
        if p.kind == P_ATOMIC:
            self.atomic(p, hold=self.o920)
        elif p.kind == P_READ:  # one MemRd, no RO (RO does not let a read pass: B2a)
            self.emit(T_READ, False, A_FETCH, p, p.region, p.off, p.length, 0)
        else:
            self.emit(T_POSTED, False, A_CQE, p, ops.CQ,
                      (p.channel * self.max_signals + p.cq_slot) * 16, 16, p.value)

    def atomic(self, p: Packet, hold: bool) -> None:
        """One AtomicOp (PCI atomic mode 4), or MemRd then the MemWr that waits for its completion."""
        if self.atomic_op:
            self.emit(T_NP_DATA, self.ro and not p.strong, A_ADD, p, p.region, p.off, 8, p.value, 1, -1, hold)
        else:
            rd = self.emit(T_READ, False, A_READ, p, p.region, p.off, 8, 0, 1, -1, hold)
            self.emit(T_POSTED, self.ro and not p.strong, A_ADD, p, p.region, p.off, 8, p.value, 1, rd.seq, hold)


def respond(scn: Scenario, arrivals: list[Packet], layout_max_signals: int, tlp_base: int,
            targets: dict[str, int] | None = None,
            prologue: dict[int, list[LocalStoreSpec]] | None = None) -> list[Tlp]:
    """Responder NIC: packets in arrival order to TLPs in root-complex arrival order."""
    return Responder(scn, layout_max_signals, tlp_base, targets, prologue).run(arrivals)
