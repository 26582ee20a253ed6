"""The ops of `epfuzz.ir.ops` made from compiled code without a Python-level `__init__`: what the built-in
senders compiled with the core (`epfuzz.core.native.COMPILED`) call to make their ops.

A sender makes its ops anew for every fresh configuration. A call of an op class from compiled code goes
through the type's call, `slot_tp_init` and the class's plain-Python `__init__` (`epfuzz.ir.slotinit`): an
interpreter frame that stores each field through its slot's descriptor, about 5,800 instructions per
`Write` under callgrind, more than half of a compiled sender's time (issue 31). Compiled, each function
here is `object.__new__` and one `PyObject_GenericSetAttr` per field (mypyc's `object.__setattr__`, which
bypasses the frozen `__setattr__` exactly as the dataclass's own `__init__` does).

Each makes the object its class makes from the same arguments: same class, every field set, equal, same
hash, repr and pickle (tests/scenario/test_opmake.py, against `dataclasses.fields`, so that a field added
to an op class fails there until its maker sets it). Parameters, order and defaults are the class's.
Plug-ins keep making ops through the classes, by keyword or not; interpreted, these are no faster than the
classes are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeVar

from epfuzz.core.native import mypyc_attr
from epfuzz.ir.ops import AtomicAdd, Flush, Op, Send, Spin, Write, WriteImm, WriteValue
from epfuzz.ir.payload import pad16
from epfuzz.ir.scenario import SpinFault

# What the sim's requester does with an op, as a small int (`epfuzz.sim.packets.op_kind`, which re-exports these):
# the WR kinds come first (<= K_SEND); K_OTHER, an op of no known class, posts and starts as a SEND did. Final:
# mypyc compiles them in as constants, no module-dict lookup per use. Here so that an `OpRec` carries its kind.
K_WRITE: Final = 0
K_CECOPY: Final = 1
K_IMM: Final = 2
K_VALUE: Final = 3
K_CEVALUE: Final = 4
K_ATOMIC: Final = 5
K_READ: Final = 6
K_SEND: Final = 7
K_OTHER: Final = 8
K_SPIN: Final = 9
K_FLUSH: Final = 10
K_GPU: Final = 11
#: an `OpRec` that only wraps an op whose fields the requester reads itself (`wrap`)
K_UNREAD: Final = -1

# Final: mypyc keeps each in a C static, where a plain module name is a dict lookup per use, and
# `object.__new__` an attribute lookup on the builtins' `object` then a method call (about 570
# instructions per op together, callgrind)
_new: Final = object.__new__
_WRITE: Final = Write
_WRITE_VALUE: Final = WriteValue
_ATOMIC_ADD: Final = AtomicAdd
_WRITE_IMM: Final = WriteImm
_SEND: Final = Send
_SPIN: Final = Spin
_FLUSH: Final = Flush


def write(qp: int, region: str, offset: int, length: int, fence: bool = False, shift: int = 0,
          tma: bool = False) -> Write:
    o: Write = _new(_WRITE)
    object.__setattr__(o, "qp", qp)
    object.__setattr__(o, "region", region)
    object.__setattr__(o, "offset", offset)
    object.__setattr__(o, "length", length)
    object.__setattr__(o, "fence", fence)
    object.__setattr__(o, "shift", shift)
    object.__setattr__(o, "tma", tma)
    return o


def write_value(qp: int, region: str, offset: int, value: int, fence: bool = False,
                strong: bool = False) -> WriteValue:
    o: WriteValue = _new(_WRITE_VALUE)
    object.__setattr__(o, "qp", qp)
    object.__setattr__(o, "region", region)
    object.__setattr__(o, "offset", offset)
    object.__setattr__(o, "value", value)
    object.__setattr__(o, "fence", fence)
    object.__setattr__(o, "strong", strong)
    return o


def atomic_add(qp: int, region: str, offset: int, delta: int, fence: bool = False,
               strong: bool = False) -> AtomicAdd:
    o: AtomicAdd = _new(_ATOMIC_ADD)
    object.__setattr__(o, "qp", qp)
    object.__setattr__(o, "region", region)
    object.__setattr__(o, "offset", offset)
    object.__setattr__(o, "delta", delta)
    object.__setattr__(o, "fence", fence)
    object.__setattr__(o, "strong", strong)
    return o


def write_imm(qp: int, region: str, offset: int, length: int, imm: int, cq_slot: int,
              fence: bool = False) -> WriteImm:
    o: WriteImm = _new(_WRITE_IMM)
    object.__setattr__(o, "qp", qp)
    object.__setattr__(o, "region", region)
    object.__setattr__(o, "offset", offset)
    object.__setattr__(o, "length", length)
    object.__setattr__(o, "imm", imm)
    object.__setattr__(o, "cq_slot", cq_slot)
    object.__setattr__(o, "fence", fence)
    return o


def send(qp: int, value: int, slot: int, fence: bool = False) -> Send:
    o: Send = _new(_SEND)
    object.__setattr__(o, "qp", qp)
    object.__setattr__(o, "value", value)
    object.__setattr__(o, "slot", slot)
    object.__setattr__(o, "fence", fence)
    return o


def spin(ns: int) -> Spin:
    o: Spin = _new(_SPIN)
    object.__setattr__(o, "ns", ns)
    return o


def flush(qp: int, stale: bool = False) -> Flush:
    o: Flush = _new(_FLUSH)
    object.__setattr__(o, "qp", qp)
    object.__setattr__(o, "stale", stale)
    return o


def insert_spins(programs: Sequence[Sequence[Any]], spins: Sequence[SpinFault], recs: bool = False) -> list[list[Any]]:
    """A copy of the channels' programs with the GPU spins `spins` (a scenario's `faults.spins`) inserted: what
    `epfuzz.protocols.base.apply_spins` does for every backend, here so that the sim's compiled build calls it
    without an interpreted frame (issue 31); most scenarios have no spins, and pay only the copies. `recs`: the
    programs are `OpRec`s (`DispatchProtocol.sender_recs`), and so are the spins inserted."""
    out = [list(p) for p in programs]
    if not spins:  # no sort, no key function made
        return out
    # in (channel, -before_op) order, ties in the given order, as `sorted` with that key had them: an insertion
    # sort over the few spins (at most four) in compiled code, each field read once, where `sorted` called a
    # key function per spin through the generic protocol (~4k instructions a build that has spins, issue 31)
    chans: list[int] = []
    befores: list[int] = []
    lens: list[int] = []
    for s in spins:
        c: int = s.channel
        b: int = s.before_op
        ns: int = s.ns
        i = len(chans)
        while i > 0 and (chans[i - 1] > c or (chans[i - 1] == c and befores[i - 1] < b)):
            i -= 1
        chans.insert(i, c)
        befores.insert(i, b)
        lens.insert(i, ns)
    for k in range(len(chans)):
        c = chans[k]
        if c < len(out) and lens[k]:
            prog = out[c]
            prog.insert(min(befores[k], len(prog)), rec_spin(lens[k]) if recs else spin(lens[k]))
    return out


#: the class `OpRec._make` makes an op of, by the record's kind, and its name; the kinds whose class has a region
_MADE: Final[dict[int, type]] = {K_WRITE: Write, K_VALUE: WriteValue, K_ATOMIC: AtomicAdd, K_IMM: WriteImm,
                                 K_SEND: Send, K_SPIN: Spin, K_FLUSH: Flush}
_MADE_NAME: Final[dict[int, str]] = {k: c.__name__ for k, c in _MADE.items()}
_MADE_REGION: Final[frozenset[int]] = frozenset(k for k, c in _MADE.items() if hasattr(c, "region"))


@mypyc_attr(acyclic=True)  # refers to an op (frozen, refers to nothing back) at most: no cycle collector
class OpRec:
    """An op as the sim's requester reads it: its kind and fields as native attributes, where each read of a field
    of the plain-Python op is a generic look-up from compiled code (~165 instructions, ~6 per WR, issue 31), and
    the op itself made only when something asks for it (`op`: a `Wr.op` read by the guided search's features,
    `explain`, the op check's message). The built-in dispatch sender makes these (`DispatchProtocol.sender_recs`);
    `op()` is the very op its `sender` returns (tests/scenario/test_opmake.py). A plug-in's op is read by the
    requester as before (`wrap`, or the op itself in a program)."""

    __slots__ = ("kind", "qp", "region", "offset", "length", "value", "slot", "fence", "flag", "batch", "_op")
    kind: int  # `K_*`; K_UNREAD: `_op` is an op of any class, its fields unread
    qp: int
    region: str
    offset: int
    length: int
    value: int  # a Write's shift, a WriteImm's imm, a WriteValue's or Send's value, an AtomicAdd's delta, a Spin's ns
    slot: int  # a WriteImm's cq_slot, a Send's slot
    fence: bool
    flag: bool  # a Write's tma, a WriteValue's or AtomicAdd's strong, a Flush's stale
    batch: int  # a CeCopy's or CeValue's batch, else -1
    _op: object  # the op, once made (None before)

    def __init__(self, kind: int, qp: int = 0, region: str = "", offset: int = 0, length: int = 0, value: int = 0,
                 slot: int = 0, fence: bool = False, flag: bool = False) -> None:
        self.kind, self.qp, self.region, self.offset, self.length = kind, qp, region, offset, length
        self.value, self.slot, self.fence, self.flag = value, slot, fence, flag
        self.batch = -1
        self._op = None

    def op(self) -> Op:
        """The op (made on first use, then the same object: a later epoch's WRs share their op as before)."""
        o = self._op
        if o is None:
            o = self._op = self._make()
        return o  # type: ignore[return-value]

    def op_class(self) -> str:
        """`type(self.op()).__name__`, the op not made for it: a record whose op is not made yet (a built-in
        sender's) makes one of its kind's exact class (`_make`); the guided search's `shape` features read it
        for every WR of a fresh form (issue 31: they made every op the records spared)."""
        if self._op is None:
            name = _MADE_NAME.get(self.kind)
            if name is not None:
                return name
        return type(self.op()).__name__

    def op_region(self) -> object:
        """`getattr(self.op(), "region", "-")`, the op not made for it (`op_class`)."""
        if self._op is None:
            k = self.kind
            if k in _MADE_REGION:
                return self.region
            if k in _MADE_NAME:
                return "-"
        return getattr(self.op(), "region", "-")

    def _make(self) -> Op:
        k = self.kind
        if k == K_WRITE:
            return write(self.qp, self.region, self.offset, self.length, self.fence, self.value, self.flag)
        if k == K_VALUE:
            return write_value(self.qp, self.region, self.offset, self.value, self.fence, self.flag)
        if k == K_ATOMIC:
            return atomic_add(self.qp, self.region, self.offset, self.value, self.fence, self.flag)
        if k == K_IMM:
            return write_imm(self.qp, self.region, self.offset, self.length, self.value, self.slot, self.fence)
        if k == K_SEND:
            return send(self.qp, self.value, self.slot, self.fence)
        if k == K_SPIN:
            return spin(self.value)
        assert k == K_FLUSH, k  # the kinds the makers below make; `wrap` sets `_op`
        return flush(self.qp, self.flag)


def wrap(op: Op) -> OpRec:
    """A record of `op` whose fields the requester reads from the op (an override's op, of any class)."""
    r = OpRec(K_UNREAD)
    r._op = op
    return r


def rec_write(qp: int, region: str, offset: int, length: int, fence: bool = False, shift: int = 0,
              tma: bool = False) -> OpRec:
    return OpRec(K_WRITE, qp, region, offset, length, shift, 0, fence, tma)


def rec_write_value(qp: int, region: str, offset: int, value: int, fence: bool = False,
                    strong: bool = False) -> OpRec:
    return OpRec(K_VALUE, qp, region, offset, 0, value, 0, fence, strong)


def rec_atomic_add(qp: int, region: str, offset: int, delta: int, fence: bool = False,
                   strong: bool = False) -> OpRec:
    return OpRec(K_ATOMIC, qp, region, offset, 0, delta, 0, fence, strong)


def rec_write_imm(qp: int, region: str, offset: int, length: int, imm: int, cq_slot: int,
                  fence: bool = False) -> OpRec:
    return OpRec(K_IMM, qp, region, offset, length, imm, cq_slot, fence)


def rec_send(qp: int, value: int, slot: int, fence: bool = False) -> OpRec:
    return OpRec(K_SEND, qp, "", 0, 0, value, slot, fence)


def rec_spin(ns: int) -> OpRec:
    return OpRec(K_SPIN, 0, "", 0, 0, ns)


def rec_flush(qp: int, stale: bool = False) -> OpRec:
    return OpRec(K_FLUSH, qp, "", 0, 0, 0, 0, False, stale)


# `Protocol.layout`'s computation on a miss of its cache (`base._layout`'s lru_cache, keyed by exactly the seven
# numbers it reads: a pure function of those, so the key is complete). A fresh configuration mostly misses it; the
# interpreted miss cost ~22k instructions under callgrind (the comprehension, `max`, the dataclass's `__init__`,
# issue 31). Here (not a module of its own: importing the protocol API stays at its few modules) the `Layout` is
# made as the ops above are, the one `Layout(...)` makes from the same numbers (tests/zoo/test_layoutmake.py).
L = TypeVar("L")  # `epfuzz.protocols.base.Layout` (not imported: base imports this module)


def layout_of(cls: type[L], tokens: int, hidden: int, scale: int, meta: int, c: int, at_end_only: object,
              interval: int) -> L:
    """`cls(...)` (`base.Layout`) of these numbers: `base._reference_layout`, written out."""
    token_bytes = pad16(hidden) + pad16(scale) + pad16(meta)
    per = tuple([len(range(ch, tokens, c)) for ch in range(c)])
    slots = max(1, max(per))  # (no channel: max() of nothing raises, as it did)
    if at_end_only:
        interval = slots
    max_signals = max(1, -(-slots // max(1, interval))) + 1
    o: L = _new(cls)
    object.__setattr__(o, "num_channels", c)
    object.__setattr__(o, "slots_per_channel", slots)
    object.__setattr__(o, "token_bytes", token_bytes)
    object.__setattr__(o, "max_signals", max_signals)
    object.__setattr__(o, "tokens_in_channel", per)
    return o
