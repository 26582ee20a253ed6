"""`epfuzz.ir.opmake` (issue 31): what the compiled senders make their ops with must be what the op classes make
from the same arguments, positional, by keyword or left to their defaults: the same class with every field set
(checked against `dataclasses.fields`, so a field added to an op class fails here until its maker sets it),
equal, with the same hash and repr, frozen, and pickled and copied as the class's own objects are."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import random
from collections.abc import Callable
from typing import Any

import pytest

from epfuzz.ir import opmake, ops

MAKERS: dict[Callable[..., Any], type] = {
    opmake.write: ops.Write, opmake.write_value: ops.WriteValue, opmake.atomic_add: ops.AtomicAdd,
    opmake.write_imm: ops.WriteImm, opmake.send: ops.Send, opmake.spin: ops.Spin, opmake.flush: ops.Flush}


def _value(rng: random.Random, f: dataclasses.Field[Any]) -> Any:
    if f.type in ("bool", bool):
        return rng.random() < 0.5
    if f.type in ("str", str):
        return rng.choice(ops.REGIONS)
    return rng.choice([0, 1, -3, rng.randrange(1 << 70), rng.randrange(1 << 20)])


def _same(a: object, b: object) -> None:
    assert type(a) is type(b)
    for f in dataclasses.fields(b):  # type: ignore[arg-type]
        assert getattr(a, f.name) == getattr(b, f.name), f.name
        assert type(getattr(a, f.name)) is type(getattr(b, f.name)), f.name
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)


@pytest.mark.parametrize("maker", list(MAKERS), ids=lambda m: m.__name__)
def test_a_maker_makes_what_its_class_makes(maker: Callable[..., Any]) -> None:
    cls = MAKERS[maker]
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING]
    rng = random.Random(maker.__name__)
    for _ in range(200):
        values = [_value(rng, f) for f in fields]
        n = rng.randrange(len(required), len(fields) + 1)  # the later fields left to their defaults
        made = maker(*values[:n])
        _same(made, cls(*values[:n]))
        _same(maker(**{f.name: v for f, v in zip(fields[:n], values)}), made)
        _same(pickle.loads(pickle.dumps(made)), made)
        _same(copy.deepcopy(made), made)
        _same(dataclasses.replace(made), made)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(made, fields[0].name, 1)


def test_a_maker_takes_its_classs_parameters() -> None:
    """Same names, order and defaults as the class (where the maker has a signature to read: pure Python)."""
    for maker, cls in MAKERS.items():
        try:
            mine = inspect.signature(maker).parameters
        except (TypeError, ValueError):  # pragma: no cover - a compiled function without a text signature
            continue
        theirs = inspect.signature(cls).parameters
        assert [(p.name, p.default) for p in mine.values()] == [(p.name, p.default) for p in theirs.values()]


def test_every_op_a_compiled_sender_makes_comes_from_its_maker() -> None:
    """The compiled senders call no op class (a class call there is the Python __init__ this module spares)."""
    from epfuzz.core.native import COMPILED, source
    for name in COMPILED:
        if name.startswith("epfuzz.protocols.") and name != "epfuzz.protocols.opcheck":
            text = source(name).read_text()
            called = {c.__name__ for c in MAKERS.values() if f"ops.{c.__name__}(" in text}
            assert not called, f"{name} calls {called}: use epfuzz.ir.opmake"


def _sorted_spins(programs: list[list[ops.Op]], spins: tuple[Any, ...]) -> list[list[ops.Op]]:
    """What `insert_spins` did with `sorted` (the reference its insertion sort keeps to)."""
    out = [list(p) for p in programs]
    for s in sorted(spins, key=lambda s: (s.channel, -s.before_op)):
        if s.channel < len(out) and s.ns:
            prog = out[s.channel]
            prog.insert(min(s.before_op, len(prog)), ops.Spin(s.ns))
    return out


def test_insert_spins_orders_as_sorted_did() -> None:
    """Spins in (channel, -before_op) order, equal keys in the given order (some differ only in length), channels
    past the programs and zero lengths skipped, indices past a program's end or below zero as `list.insert`."""
    from epfuzz.ir.scenario import SpinFault
    rng = random.Random(31)
    for _ in range(3000):
        programs = [[opmake.flush(rng.randrange(3)) for _ in range(rng.randrange(5))] for _ in range(rng.randrange(5))]
        spins = tuple(SpinFault(rng.randrange(-2, 6), rng.randrange(-3, 8), rng.choice([0, 1, 5, 300]))
                      for _ in range(rng.randrange(5)))
        try:
            want: Any = _sorted_spins(programs, spins)
        except IndexError as e:
            want = type(e)
        try:
            got: Any = opmake.insert_spins(programs, spins)
        except IndexError as e:
            got = type(e)
        assert got == want, (programs, spins)


RECS: dict[Callable[..., Any], Callable[..., Any]] = {
    opmake.rec_write: opmake.write, opmake.rec_write_value: opmake.write_value,
    opmake.rec_atomic_add: opmake.atomic_add, opmake.rec_write_imm: opmake.write_imm, opmake.rec_send: opmake.send,
    opmake.rec_spin: opmake.spin, opmake.rec_flush: opmake.flush}


@pytest.mark.parametrize("rec", list(RECS), ids=lambda m: m.__name__)
def test_a_records_op_is_what_its_maker_makes(rec: Callable[..., Any]) -> None:
    """`OpRec.op()` of a record maker's record is its op maker's op from the same arguments (made once: the same
    object every time), and the record's kind is the requester's kind of that op (`op_kind`)."""
    from epfuzz.sim.packets import op_kind
    from epfuzz.sim.sendq import read_op

    maker = RECS[rec]
    fields = dataclasses.fields(MAKERS[maker])
    required = [f for f in fields if f.default is dataclasses.MISSING]
    rng = random.Random(rec.__name__)
    for _ in range(200):
        values = [_value(rng, f) for f in fields]
        n = rng.randrange(len(required), len(fields) + 1)
        r = rec(*values[:n])
        op = r.op()
        _same(op, maker(*values[:n]))
        assert r.op() is op and r.kind == op_kind(op)
        # the requester reads a plug-in's op into the very fields a built-in sender's record has
        got = read_op(op, op_kind(op))
        assert got.op() is op
        fresh = rec(*values[:n])
        want = [getattr(fresh, a) for a in ("kind", "qp", "region", "offset", "length", "value", "slot", "fence",
                                             "batch")]
        assert [getattr(got, a) for a in ("kind", "qp", "region", "offset", "length", "value", "slot", "fence",
                                          "batch")] == want
        if r.kind not in (opmake.K_WRITE, opmake.K_SPIN):  # a Write's tma the requester never reads
            assert got.flag == fresh.flag


def test_wrap_keeps_its_op() -> None:
    op = ops.Write(0, ops.DATA, 0, 8)
    r = opmake.wrap(op)
    assert r.kind == opmake.K_UNREAD and r.op() is op
