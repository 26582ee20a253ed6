"""The requester dispatches on `op_kind` (issue 31: a dict hit by exact type instead of an isinstance chain
per op): every op class must keep the kind its branch had, a subclass (a plug-in's op) the kind of its base,
and the responder's per-run Attrs table must hand each TLP the attributes its QP's function and the knobs give."""

from __future__ import annotations

import random
from dataclasses import dataclass

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.model.ordering import TlpType
from epfuzz.protocols import get_protocol
from epfuzz.sim import engine
from epfuzz.sim import packets as pk
from epfuzz.sim.packets import PacketKind, op_kind
from epfuzz.sim.requester import post_and_send

EXPECTED = {ops.Write: pk.K_WRITE, ops.CeCopy: pk.K_CECOPY, ops.WriteImm: pk.K_IMM, ops.WriteValue: pk.K_VALUE,
            ops.CeValue: pk.K_CEVALUE, ops.AtomicAdd: pk.K_ATOMIC, ops.Read: pk.K_READ, ops.Send: pk.K_SEND,
            ops.Spin: pk.K_SPIN, ops.Flush: pk.K_FLUSH, ops.SrcStore: pk.K_GPU, ops.SrcFlush: pk.K_GPU,
            ops.SrcClear: pk.K_GPU, ops.ProxyFence: pk.K_GPU}


def test_every_op_class_has_the_kind_of_its_branch() -> None:
    assert set(EXPECTED) >= set(ops.WR_OPS) | set(ops.GPU_OPS) | {ops.Spin, ops.Flush}
    for cls, kind in EXPECTED.items():
        assert op_kind(object.__new__(cls)) == kind, cls.__name__
    # the WR kinds are the ones below K_OTHER (`SendQueues.start` relies on the order)
    assert all((k <= pk.K_SEND) == (cls in ops.WR_OPS) for cls, k in EXPECTED.items())
    assert op_kind(object()) == pk.K_OTHER


@dataclass(frozen=True, slots=True)
class TaggedWrite(ops.Write):
    """A plug-in's own op: a Write with a tag the emulator ignores."""

    tag: int = 0


def test_a_subclassed_op_posts_as_its_base() -> None:
    scn = Scenario()
    base = [ops.Write(0, ops.DATA, 0, 9000), ops.WriteValue(0, ops.SIGNAL, 0, 1)]
    sub = [TaggedWrite(0, ops.DATA, 0, 9000, tag=3), ops.WriteValue(0, ops.SIGNAL, 0, 1)]
    assert op_kind(sub[0]) == pk.K_WRITE
    got = [[(p.kind, p.off, p.length, p.ready, p.arrive) for p in post_and_send(scn, [prog], 0, 0, [0])[1]]
           for prog in (base, sub)]
    assert got[0] == got[1] and len(got[0]) > 2 and got[0][0][0] == PacketKind.WRITE


def test_each_tlp_carries_its_qps_function_and_the_knobs_attributes() -> None:
    rng = random.Random(31)
    proto = get_protocol("dispatch_any")
    seen = set()
    for _ in range(300):
        scn = codec.decode(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 96))), "dispatch_any", "spec")
        run = engine.build(scn, proto)
        nf, ido = scn.knobs.num_functions, scn.knobs.ido
        for t in run.tlps:
            if t.local:
                continue
            assert (t.attrs.rid, t.attrs.ido) == (t.qp % nf, ido)
            seen.add((nf, t.qp % nf, t.attrs.type, t.attrs.ro))
            if t.attrs.type == TlpType.READ:
                assert not t.attrs.ro  # RO does not let a read pass (B2a): a MemRd never carries it
    assert {(2, 0), (2, 1)} <= {(nf, rid) for nf, rid, _, _ in seen}
    assert {True, False} <= {ro for *_, ro in seen}
