"""An exact `DispatchProtocol`'s ops reach the requester as `OpRec`s (`DispatchProtocol.sender_recs`, issue 31: its
fields read natively, most ops never made): the build over them must be the build over the ops themselves, which
is what a plug-in's sender gives. Compared field by field, WRs, packets and Flush waits, for random decoded
scenarios of every built-in DispatchProtocol, every epoch, with the scenario's spins."""

from __future__ import annotations

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.opmake import OpRec, insert_spins
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Layout
from epfuzz.protocols.dispatch import DispatchProtocol
from epfuzz.sim import built
from epfuzz.sim.packets import FlushWait, Packet, Wr
from epfuzz.sim.requester import post_and_send
from tests.decoded import dispatch_protocols, random_decoded


def _names(cls: type) -> list[str]:
    """The fields of a class of `epfuzz.sim.packets` (compiled, its slots are `__mypyc_attrs__`)."""
    return list(getattr(cls, "__slots__", None) or getattr(cls, "__mypyc_attrs__"))  # noqa: B009 - mypy knows no such attribute


_PACKET = _names(Packet)
_WR = [n for n in _names(Wr) if n != "rec"] + ["op"]
_FLUSH = _names(FlushWait)


def _fields(objs: list[object], names: list[str]) -> list[tuple[object, ...]]:
    return [tuple(getattr(o, n, None) for n in names) for o in objs]



@pytest.mark.parametrize("name", dispatch_protocols())
def test_records_post_as_their_ops(name: str) -> None:
    p = get_protocol(name)
    assert isinstance(p, DispatchProtocol)
    for data, scn in random_decoded(name, 120, name):
        lay = p.layout(scn)
        psn_r, psn_o = [0] * scn.topology.num_qps, [0] * scn.topology.num_qps
        fl_r: list[FlushWait] = []
        fl_o: list[FlushWait] = []
        progs = []
        for e in range(scn.payload.epochs):
            recs = insert_spins(p.sender_recs(scn, lay, e), scn.faults.spins, True)
            assert all(isinstance(r, OpRec) for prog in recs for r in prog)
            opsl = [[r.op() for r in prog] for prog in recs]
            assert opsl == insert_spins(p.sender(scn, lay, e), scn.faults.spins)
            progs.append(opsl)
            got = post_and_send(scn, recs, e, 0, psn_r, fl_r)
            want = post_and_send(scn, opsl, e, 0, psn_o, fl_o)
            assert _fields(got[0], _WR) == _fields(want[0], _WR), (name, data.hex(), e)  # type: ignore[arg-type]
            assert _fields(got[1], _PACKET) == _fields(want[1], _PACKET), (name, data.hex(), e)  # type: ignore[arg-type]
        assert psn_r == psn_o
        assert _fields(fl_r, _FLUSH) == _fields(fl_o, _FLUSH)  # type: ignore[arg-type]
        form = built.build_form(scn, p)
        for w in form.wrs:  # the form's WRs' ops, made when asked, are the sender's
            o = progs[w.epoch][w.channel][w.op_index]
            assert type(w.op) is type(o) and w.op == o


def test_the_build_takes_records_only_from_an_exact_dispatch_protocol() -> None:
    """A subclass (a plug-in's) may override `sender`: the build calls it, and posts its ops."""
    base = get_protocol("dispatch_any")
    assert isinstance(base, DispatchProtocol)
    calls: list[int] = []

    class Mine(DispatchProtocol):
        def sender(self, scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
            calls.append(epoch)
            return super().sender(scn, lay, epoch)

    mine = Mine("mine", "", dict(base.fixed), "clean")
    scn = codec.decode(bytes(range(40)), "dispatch_any", "spec")
    a, b = built.build_form(scn, base), built.build_form(scn, mine)
    assert calls == list(range(scn.payload.epochs))
    assert _fields(a.packets, _PACKET) == _fields(b.packets, _PACKET)  # type: ignore[arg-type]
    assert _fields(a.wrs, _WR) == _fields(b.wrs, _WR)  # type: ignore[arg-type]


class _Plain(DispatchProtocol):
    """A subclass (as a plug-in's): the build posts its `sender`'s ops, each epoch anew."""


#: what a DispatchProtocol's sender, layout and prologue read of it (`DispatchProtocol.__init__`'s settings)
_SETTINGS = ("flush_before_signal", "shared_word", "no_signal", "wrong_stride", "prologue_reset")


@pytest.mark.parametrize("name", dispatch_protocols())
def test_the_forms_build_is_the_plain_ops_build(name: str) -> None:
    """`build_form` of an exact DispatchProtocol (records, a repeated epoch shifted by `repost`) against the same
    protocol as a subclass (its ops, every epoch posted): WRs, packets and Flush waits field by field."""
    p = get_protocol(name)
    assert isinstance(p, DispatchProtocol)
    plain = _Plain(p.name, p.doc, dict(p.fixed), "clean")
    for attr in _SETTINGS:
        setattr(plain, attr, getattr(p, attr))
    repeats = 0
    for data, scn in random_decoded(name, 150, name + "form"):
        a, b = built.build_form(scn, p), built.build_form(scn, plain)
        assert _fields(a.wrs, _WR) == _fields(b.wrs, _WR), (name, data.hex())  # type: ignore[arg-type]
        assert _fields(a.packets, _PACKET) == _fields(b.packets, _PACKET), (name, data.hex())  # type: ignore[arg-type]
        assert _fields(a.flushes, _FLUSH) == _fields(b.flushes, _FLUSH), (name, data.hex())  # type: ignore[arg-type]
        assert a.prologue == b.prologue
        repeats += scn.payload.epochs > 1 and scn.signal.kind != "send"
    assert repeats > 10  # the shifted epochs were met
