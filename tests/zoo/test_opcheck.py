"""The op check's fast path (`opcheck._fits`) passes exactly the ops the full check (`opcheck._problem`) passes.

`check_programs` asks `_fits` first and `_problem` only for what `_fits` does not pass, so a `_fits` that
passed an op outside the layout would let it through silently (a plug-in's arithmetic bug reported as an
ordering finding, exit 1 instead of 3). Random ops of every class, in and out of range, on random layouts;
a subclass of an op class goes the full way.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epfuzz.infra.errors import ProtocolError
from epfuzz.ir import ops
from epfuzz.protocols.base import Layout
from epfuzz.protocols.opcheck import _fits, _problem, check_programs

REGIONS = st.sampled_from([*ops.REGIONS, "nowhere"])
#: offsets and lengths around every region's edges, negatives and misaligned words included
NUM = st.integers(-24, 700)


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    c = draw(st.integers(1, 4))
    spc = draw(st.integers(1, 4))
    return Layout(c, spc, draw(st.sampled_from([16, 32, 48])), draw(st.integers(1, 4)),
                  tuple(draw(st.integers(0, spc)) for _ in range(c)))


@dataclasses.dataclass(frozen=True, slots=True)
class TaggedWrite(ops.Write):
    """A plug-in's own kind of WRITE: `_fits` does not know it, the full check does."""


OPS = st.one_of(
    st.builds(ops.Write, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(TaggedWrite, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(ops.WriteValue, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(ops.AtomicAdd, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(ops.WriteImm, st.integers(0, 3), REGIONS, NUM, NUM, st.integers(0, 9), st.integers(-2, 6)),
    st.builds(ops.Send, st.integers(0, 3), NUM, st.integers(-2, 6)),
    st.builds(ops.Read, st.integers(0, 3), REGIONS, NUM, NUM),
    st.builds(ops.Flush, st.integers(0, 3)),
    st.builds(ops.Spin, NUM),
    st.builds(ops.SrcStore, NUM, NUM),
    st.builds(ops.CeValue, st.integers(0, 3), REGIONS, NUM, NUM, st.integers(0, 3)),
)


@settings(max_examples=3000, deadline=None)
@given(layouts(), OPS, st.integers(0, 5))
def test_fits_passes_only_what_the_full_check_passes(lay: Layout, op: ops.Op, channel: int) -> None:
    ok = _problem(op, channel, lay, lay.sizes) is None
    if _fits(op, channel, lay, lay.sizes):
        assert ok, op
    elif type(op) in (ops.Write, ops.WriteValue, ops.AtomicAdd, ops.WriteImm, ops.Send, ops.Flush, ops.Spin):
        assert not ok, f"the fast path should pass {op}"  # it decides these classes alone


@settings(max_examples=500, deadline=None)
@given(layouts(), st.lists(st.lists(OPS, max_size=4), min_size=1, max_size=4))
def test_check_programs_raises_for_the_first_op_outside(lay: Layout, programs: list[list[ops.Op]]) -> None:
    bad = [(c, i, why) for c, prog in enumerate(programs) for i, op in enumerate(prog)
           if (why := _problem(op, c, lay, lay.sizes)) is not None]
    if not bad:
        check_programs(programs, lay, "p", 0)
        return
    c, i, why = bad[0]
    with pytest.raises(ProtocolError) as err:
        check_programs(programs, lay, "p", 0)
    assert f"channel {c}, op {i} " in str(err.value) and str(err.value).endswith(why)


def test_each_class_fast_path_catches_its_own_edge() -> None:
    lay = Layout(2, 2, 16, 3, (2, 1))  # data 64 bytes, signal 16, cq and recv 96
    assert _fits(ops.Write(0, ops.DATA, 48, 16), 0, lay, lay.sizes)
    assert not _fits(ops.Write(0, ops.DATA, 49, 16), 0, lay, lay.sizes)
    assert _fits(ops.AtomicAdd(0, ops.SIGNAL, 8, 1), 1, lay, lay.sizes)
    assert not _fits(ops.AtomicAdd(0, ops.SIGNAL, 4, 1), 1, lay, lay.sizes)  # misaligned
    assert not _fits(ops.WriteValue(0, ops.SIGNAL, 9, 1), 1, lay, lay.sizes)
    assert _fits(ops.WriteImm(0, ops.DATA, 0, 0, 7, 2), 1, lay, lay.sizes)
    assert not _fits(ops.WriteImm(0, ops.DATA, 0, 0, 7, 3), 1, lay, lay.sizes)  # max_signals 3
    assert not _fits(ops.Send(0, 1, 0), 2, lay, lay.sizes)  # no channel 2
