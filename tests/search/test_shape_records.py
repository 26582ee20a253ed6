"""The `shape` features read each WR's op class and region off its record (`OpRec.op_class`, `op_region`), so a
fresh form of a built-in sender makes no op for them (issue 31: they made every op the records spared). They must
be the features the ops themselves give, in the same iteration order: for random decoded scenarios of every
built-in protocol, and for a plug-in whose sender posts an op subclass and an op of no known class."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.opmake import OpRec, rec_flush, rec_spin, rec_write
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.protocols.base import Layout
from epfuzz.protocols.dispatch import DispatchProtocol
from epfuzz.search.featcore import shape_of
from epfuzz.sim import built
from tests.decoded import dispatch_protocols, random_decoded


def _by_ops(wrs: list[Any], tokens_in_channel: Any) -> list[tuple[Any, ...]]:
    """`shape_of` as first written, over each WR's op (`Wr.op`, which makes it), in its set's iteration order."""
    data = ops.DATA
    data_qps: dict[int, set[int]] = {}
    for w in wrs:
        if getattr(w.op, "region", None) == data:
            data_qps.setdefault(w.channel, set()).add(w.qp)
    out: set[tuple[Any, ...]] = set()
    for w in wrs:
        op = w.op
        out.add(("wr", type(op).__name__, getattr(op, "region", "-"),
                 "data-qp" if w.qp in data_qps.get(w.channel, set()) else "other-qp"))
    epochs = min(max((w.epoch for w in wrs), default=0), 3)
    out.add(("epochs", epochs))
    if 0 in tokens_in_channel:
        out.add(("empty-channel", epochs))
    return list(out)


def _unmade(wrs: list[Any]) -> int:
    return sum(w.rec._op is None for w in wrs)


def _check(scn: Scenario, proto: Any) -> int:
    """The shape of a fresh form by records then by ops (same list); the WRs whose op records spared."""
    form = built.build_form(scn, proto)
    unmade = _unmade(form.wrs)
    got = list(shape_of(form.wrs, form.layout.tokens_in_channel))
    assert _unmade(form.wrs) == unmade  # reading the shape made no op
    assert got == _by_ops(form.wrs, form.layout.tokens_in_channel), (proto.name, scn)
    return unmade


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_the_shape_by_records_is_the_shape_by_ops(name: str) -> None:
    p = get_protocol(name)
    spared = sum(_check(scn, p) for _, scn in random_decoded(name, 25, "shape" + name))
    if name in dispatch_protocols():
        assert spared > 0  # the records path was taken, and the test compared records with ops


@dataclass(frozen=True, slots=True)
class TaggedWrite(ops.Write):
    """A plug-in's op: a Write of its own class (the shape names it, not Write)."""

    tag: int = 0


@dataclass(frozen=True, slots=True)
class Note:
    """A plug-in's op of no known class: posted as a SEND is, no region."""

    qp: int
    value: int
    slot: int
    fence: bool = False


class Tagged(DispatchProtocol):
    """A plug-in: the built-in sender's ops, each data Write as a TaggedWrite, and a Note after the first op."""

    def sender(self, scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
        progs: list[list[Any]] = []
        for prog in super().sender(scn, lay, epoch):
            out: list[Any] = [TaggedWrite(o.qp, o.region, o.offset, o.length, o.fence, o.shift, o.tma, 7)
                              if type(o) is ops.Write and o.region == ops.DATA else o for o in prog]
            if out:
                out.insert(1, Note(0, 5, 0))
            progs.append(out)
        return progs


def test_a_plugins_subclass_op_keeps_its_class_and_region() -> None:
    base = get_protocol("dispatch_any")
    assert isinstance(base, DispatchProtocol)
    mine = Tagged("tagged", "", dict(base.fixed), "clean")
    names: set[str] = set()
    for data, _ in random_decoded("dispatch_any", 40, "tagged"):
        scn = codec.decode(data, "dispatch_any", "spec")
        assert _check(scn, mine) == 0
        names |= {f[1] for f in shape_of(built.build_form(scn, mine).wrs, (1,)) if f[0] == "wr"}
    assert {"TaggedWrite", "Note"} <= names


def test_a_record_names_the_op_it_makes() -> None:
    """Each kind `OpRec` makes an op of: the class name and region of that op, and the op still unmade; a record
    whose op was made (or wraps a plug-in's) reads the op."""
    rng = random.Random(3)
    for _ in range(200):
        qp, off = rng.randrange(4), rng.randrange(64)
        for r in (rec_write(qp, rng.choice(ops.REGIONS), off, 16), rec_spin(off), rec_flush(qp, bool(off % 2)),
                  OpRec(rng.choice((0, 2, 3, 5, 7)), qp, rng.choice(ops.REGIONS), off, 8, 1, 0)):
            name, region = r.op_class(), r.op_region()
            assert r._op is None
            o = r.op()
            assert (name, region) == (type(o).__name__, getattr(o, "region", "-"))
            assert (r.op_class(), r.op_region()) == (name, region)
