"""The op check classifies an op's class once (`opcheck.shape_of`) and applies the layout's rules to that shape
(`opcheck._problem`): it must pass and refuse exactly what the rules, stated per op by isinstance below
(`reference`), pass and refuse, with the same words, for random ops of every class (a plug-in's subclass
included) in and out of range on random layouts.

A check that passed an op outside the layout would let it through silently (a plug-in's arithmetic bug
reported as an ordering finding, exit 1 instead of 3).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epfuzz.encoding import codec
from epfuzz.infra.errors import ProtocolError
from epfuzz.ir import ops
from epfuzz.protocols import opcheck
from epfuzz.protocols.base import Layout
from epfuzz.protocols.opcheck import _problem, check_programs, shape_of
from epfuzz.sim.requester import Nic, post_and_send

REGIONS = st.sampled_from([*ops.REGIONS, "nowhere"])
#: offsets and lengths around every region's edges, negatives and misaligned words included
NUM = st.integers(-24, 700)


def reference(op: ops.Op, channel: int, lay: Layout) -> str | None:
    """The layout's rules, per op, as isinstance has the op's class (what the check made per op before shapes)."""
    sizes = lay.sizes
    span = None
    if isinstance(op, (ops.Write, ops.WriteImm, ops.Read, ops.CeCopy)):
        span = op.region, op.offset, op.length
    elif isinstance(op, (ops.WriteValue, ops.AtomicAdd, ops.CeValue)):
        span = op.region, op.offset, 8
    if span is not None:
        region, off, length = span
        if region not in sizes:
            return f"region {region!r} is none of {sorted(sizes)}"
        if off < 0 or length < 0 or off + length > sizes[region]:
            return f"bytes [{off}, {off + length}) are outside region {region!r} of {sizes[region]} bytes"
    if isinstance(op, (ops.SrcStore, ops.SrcClear)):
        size = sizes[ops.DATA]
        if op.offset < 0 or op.length < 0 or op.offset + op.length > size:
            return f"source bytes [{op.offset}, {op.offset + op.length}) are outside the data region of {size} bytes"
    if isinstance(op, ops.AtomicAdd) and op.offset % 8:
        return f"an atomic needs an 8-byte aligned offset, not {op.offset}"
    slot = op.cq_slot if isinstance(op, ops.WriteImm) else op.slot if isinstance(op, ops.Send) else None
    if slot is not None:
        if not 0 <= slot < lay.max_signals:
            return (f"CQ/recv entry {slot} of channel {channel} is outside [0, {lay.max_signals}) "
                    "(layout.max_signals)")
        if channel >= lay.num_channels:
            return f"a completion of channel {channel}, but the layout has {lay.num_channels} channels"
    return None


def problem(op: ops.Op, channel: int, lay: Layout) -> str | None:
    return _problem(op, shape_of(op), channel, lay.max_signals, lay.num_channels, lay.sizes)


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    c = draw(st.integers(1, 4))
    spc = draw(st.integers(1, 4))
    return Layout(c, spc, draw(st.sampled_from([16, 32, 48])), draw(st.integers(1, 4)),
                  tuple(draw(st.integers(0, spc)) for _ in range(c)))


@dataclasses.dataclass(frozen=True, slots=True)
class TaggedWrite(ops.Write):
    """A plug-in's own kind of WRITE: shaped as a Write."""


@dataclasses.dataclass(frozen=True, slots=True)
class TaggedAdd(ops.AtomicAdd):
    """A plug-in's own atomic: shaped as an AtomicAdd (the alignment rule included)."""


OPS = st.one_of(
    st.builds(ops.Write, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(TaggedWrite, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(ops.WriteValue, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(ops.AtomicAdd, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(TaggedAdd, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(ops.WriteImm, st.integers(0, 3), REGIONS, NUM, NUM, st.integers(0, 9), st.integers(-2, 6)),
    st.builds(ops.Send, st.integers(0, 3), NUM, st.integers(-2, 6)),
    st.builds(ops.Read, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(ops.CeCopy, st.integers(0, 3), REGIONS, NUM, NUM, st.integers(0, 3)),
    st.builds(ops.CeValue, st.integers(0, 3), REGIONS, NUM, NUM, st.integers(0, 3)),
    st.builds(ops.Flush, st.integers(0, 3)),
    st.builds(ops.Spin, NUM),
    st.builds(ops.SrcStore, NUM, NUM),
    st.builds(ops.SrcClear, NUM, NUM),
    st.builds(ops.SrcFlush, st.booleans()),
    st.builds(ops.ProxyFence),
)


#: work requests that carry IBV_SEND_FENCE: the requester holds a fenced WR back in the QP's fence queue (made on
#: first use) before it reads the rest of its fields, a path the unfenced ones never take
FENCED = st.one_of(
    st.builds(ops.Write, st.integers(0, 3), REGIONS, NUM, NUM, st.just(True)),
    st.builds(ops.WriteValue, st.integers(0, 3), REGIONS, NUM, NUM, st.just(True)),
    st.builds(ops.AtomicAdd, st.integers(0, 3), REGIONS, NUM, NUM, st.just(True)),
    st.builds(TaggedAdd, st.integers(0, 3), REGIONS, NUM, NUM, st.just(True)),
    st.builds(ops.WriteImm, st.integers(0, 3), REGIONS, NUM, NUM, st.integers(0, 9), st.integers(-2, 6),
              st.just(True)),
    st.builds(ops.Send, st.integers(0, 3), NUM, st.integers(-2, 6), st.just(True)),
    st.builds(ops.Read, st.integers(0, 3), REGIONS, NUM, NUM, st.just(True)),
)
ANY_WR = st.one_of(OPS, FENCED)


class Marker:
    """A plug-in's op of its own class with none of an op's fields: no rule applies to it (the reference
    passes it) and the requester cannot read it."""

    def __repr__(self) -> str:
        return "Marker()"


@settings(max_examples=3000, deadline=None)
@given(layouts(), OPS, st.integers(0, 5))
def test_the_check_states_the_rules_of_the_reference(lay: Layout, op: ops.Op, channel: int) -> None:
    assert problem(op, channel, lay) == reference(op, channel, lay), op


@settings(max_examples=500, deadline=None)
@given(layouts(), st.lists(st.lists(OPS, max_size=4), min_size=1, max_size=4))
def test_check_programs_raises_for_the_first_op_outside(lay: Layout, programs: list[list[ops.Op]]) -> None:
    bad = [(c, i, why) for c, prog in enumerate(programs) for i, op in enumerate(prog)
           if (why := reference(op, c, lay)) is not None]
    if not bad:
        check_programs(programs, lay, "p", 0)
        return
    c, i, why = bad[0]
    with pytest.raises(ProtocolError) as err:
        check_programs(programs, lay, "p", 0)
    assert f"channel {c}, op {i} " in str(err.value) and str(err.value).endswith(why)


def test_each_class_has_the_shape_of_its_rules() -> None:
    lay = Layout(2, 2, 16, 3, (2, 1))  # data 64 bytes, signal 16, cq and recv 96
    assert problem(ops.Write(0, ops.DATA, 48, 16), 0, lay) is None
    assert "outside region 'data'" in (problem(ops.Write(0, ops.DATA, 49, 16), 0, lay) or "")
    assert problem(TaggedAdd(0, ops.SIGNAL, 8, 1), 1, lay) is None
    assert "aligned" in (problem(TaggedAdd(0, ops.SIGNAL, 4, 1), 1, lay) or "")  # a subclass keeps its rules
    assert problem(ops.WriteImm(0, ops.DATA, 0, 0, 7, 2), 1, lay) is None
    assert "layout.max_signals" in (problem(ops.WriteImm(0, ops.DATA, 0, 0, 7, 3), 1, lay) or "")
    assert "2 channels" in (problem(ops.Send(0, 1, 0), 2, lay) or "")  # no channel 2
    shape = shape_of(ops.ProxyFence())
    assert (shape.span, shape.src, shape.aligned, shape.slot) == (opcheck.NO_SPAN, False, False, opcheck.NO_SLOT)
    assert shape_of(TaggedWrite(0, ops.DATA, 0, 1)) is not shape_of(ops.Write(0, ops.DATA, 0, 1))  # per exact type


@settings(max_examples=500, deadline=None)
@given(layouts(), st.lists(st.lists(ANY_WR, max_size=4), min_size=1, max_size=4))
def test_the_requester_refuses_exactly_what_the_check_refuses(lay: Layout, programs: list[list[ops.Op]]) -> None:
    """The sim's build checks each op as the requester reads its fields (`OutsideLayout`, then `check_programs`
    names the first op in program order): it must refuse a program set iff an op breaks a rule."""
    scn = codec.decode(b"", "dispatch_any")
    bad = any(reference(op, c, lay) is not None for c, prog in enumerate(programs) for op in prog)
    nic = Nic(scn, lay.sizes, lay.max_signals, lay.num_channels)
    if bad:
        with pytest.raises(opcheck.OutsideLayout):
            post_and_send(scn, programs, 0, 0, [0] * scn.topology.num_qps, nic=nic)
    else:
        post_and_send(scn, programs, 0, 0, [0] * scn.topology.num_qps, nic=nic)


#: a build whose sender posts `PROGRAMS`, printing what it raised: run in this process (the path it loaded) and
#: under EPFUZZ_PURE=1, so that both paths are held to the same answer
_PROBE = """
from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols.dispatch import DispatchProtocol
from epfuzz.sim.built import build_form

class Marker:  # a plug-in's op of its own class, with none of the fields the requester reads
    pass

class Bad(DispatchProtocol):
    def sender(self, scn, lay, epoch):
        return PROGRAMS(lay)

def probe():
    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 1}, "topology": {"num_channels": 1}})
    try:
        build_form(scn, Bad("bad", "probe", {}, "finding", ()))
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return "built"
"""

_CASES = {
    # a region that is no string: the compiled requester's typed field read failed first (a TypeError)
    "region None": "lambda lay: [[ops.Write(0, None, 0, 16)]]",
    # an op the requester cannot read comes first in time; the op after it is outside the data region
    "unreadable op first": "lambda lay: [[Marker(), ops.Write(0, ops.DATA, lay.sizes[ops.DATA], 16)]]",
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_an_op_outside_the_layout_is_named_whatever_the_requester_met_first(case: str) -> None:
    """Review of the op check moved into the requester: a non-string region crashed the compiled path with a
    TypeError where the pure one said ProtocolError, and a plug-in op the requester cannot read hid a later op
    outside the layout. The check runs whenever posting fails, as it did before posting: a ProtocolError naming
    op of the same text on both paths."""
    import os
    import subprocess
    import sys

    code = _PROBE.replace("PROGRAMS(lay)", f"({_CASES[case]})(lay)")
    here: dict[str, object] = {}
    exec(compile(code, "<string>", "exec"), here)  # the name `python -c` gives it
    said = here["probe"]()  # type: ignore[operator]
    env = {**os.environ, "EPFUZZ_PURE": "1"}
    pure = subprocess.run([sys.executable, "-c", code + "\nprint(probe())"], capture_output=True, text=True,
                          env=env, check=True).stdout.strip()
    assert isinstance(said, str), said
    assert said.startswith("ProtocolError: protocol 'dispatch_any', epoch 0, channel 0, op "), said
    assert said == pure


class Posts:
    """A protocol whose sender posts given programs (`programs`, set per example)."""

    programs: list[list[object]] = []

    @staticmethod
    def protocol() -> object:
        from epfuzz.protocols.dispatch import DispatchProtocol

        class Given(DispatchProtocol):
            def sender(self, scn, lay, epoch):  # type: ignore[no-untyped-def]
                return Posts.programs

        return Given("given", "posts the programs given", {}, "finding", ())


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3), st.lists(st.lists(st.one_of(ANY_WR, st.builds(Marker)), max_size=4), min_size=1,
                                    max_size=3))
def test_the_build_names_the_first_op_outside_whatever_else_the_programs_hold(
        channels: int, programs: list[list[object]]) -> None:
    """Fenced WRs and ops the requester cannot read (`Marker`) anywhere in the programs: the build still names
    the first op outside the layout in program order, with the reference's words, as when the check ran
    before posting (review of the op check moved into the requester)."""
    from epfuzz.sim.built import build_form

    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 1},
                           "topology": {"num_channels": channels}})
    proto = Posts.protocol()
    lay = proto.layout(scn)  # type: ignore[attr-defined]
    bad = [(c, i, why) for c, prog in enumerate(programs) for i, op in enumerate(prog)
           if not isinstance(op, Marker) and (why := reference(op, c, lay)) is not None]  # type: ignore[arg-type]
    Posts.programs = programs
    if not bad:
        if not any(isinstance(op, Marker) for prog in programs for op in prog):
            build_form(scn, proto)  # type: ignore[arg-type]  # nothing to refuse
        else:  # the requester cannot read the plug-in's own op: its error, not one the check names
            with pytest.raises(AttributeError):
                build_form(scn, proto)  # type: ignore[arg-type]
        return
    c, i, why = bad[0]
    with pytest.raises(ProtocolError) as err:
        build_form(scn, proto)  # type: ignore[arg-type]
    assert f"channel {c}, op {i} " in str(err.value) and why in str(err.value)
