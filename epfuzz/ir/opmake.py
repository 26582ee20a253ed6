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
from typing import Final

from epfuzz.ir.ops import AtomicAdd, Flush, Op, Send, Spin, Write, WriteImm, WriteValue
from epfuzz.ir.scenario import SpinFault

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


def insert_spins(programs: Sequence[Sequence[Op]], spins: Sequence[SpinFault]) -> list[list[Op]]:
    """A copy of the channels' programs with the GPU spins `spins` (a scenario's `faults.spins`) inserted: what
    `epfuzz.protocols.base.apply_spins` does for every backend, here so that the sim's compiled build calls it
    without an interpreted frame (issue 31); most scenarios have no spins, and pay only the copies."""
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
            prog.insert(min(befores[k], len(prog)), spin(lens[k]))
    return out
