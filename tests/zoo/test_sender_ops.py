"""The dispatch sender posts the ops its plain reading says, for every built-in protocol it serves.

`DispatchProtocol.sender` reads the scenario once, writes `Layout.slot_offset`/`token_of` out as
arithmetic and makes its ops with positional arguments (issue 31: the compiled sender's calls into
plain Python cost more than the ops). `reference` below is that sender as first written, through the
Layout's methods and keyword arguments; the two must post equal ops (class and every field) for random
decoded scenarios of every built-in `DispatchProtocol`, every epoch.
"""

from __future__ import annotations

import random

import pytest

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Layout
from epfuzz.protocols.dispatch import FINISH, DispatchProtocol, data_wrs, pack2
from tests.decoded import dispatch_protocols, random_decoded


def _signal(p: DispatchProtocol, scn: Scenario, c: int, qp: int, old: int, tail: int, n: int, k: int,
            epoch: int) -> ops.Op:
    sig = scn.signal
    finish = FINISH if tail == n else 0
    pack = sig.encoding == "pack2"
    word = 0 if p.shared_word else c * 8
    if sig.kind == "faa":
        return ops.AtomicAdd(qp, ops.SIGNAL, word, pack2(finish, tail - old) if pack else tail - old, fence=sig.fence)
    if sig.kind == "write":
        return ops.WriteValue(qp, ops.SIGNAL, word, pack2(finish, tail) if pack else tail, fence=sig.fence)
    if sig.kind == "write_imm":
        return ops.WriteImm(qp, ops.DATA, 0, 0, imm=(c << 24) | (tail << 1) | finish, cq_slot=k, fence=sig.fence)
    return ops.Send(qp, value=((epoch + 1) << 48) | (tail & 0xFFFF) << 32 | (c << 8) | finish, slot=k,
                    fence=sig.fence)


def reference(p: DispatchProtocol, scn: Scenario, lay: Layout, epoch: int) -> list[list[ops.Op]]:
    sig = scn.signal
    programs: list[list[ops.Op]] = []
    for c in range(lay.num_channels):
        qp = scn.qp_of_channel(c)
        sqp = (qp + 1) % scn.topology.num_qps if sig.other_qp else qp
        n = lay.tokens_in_channel[c]
        interval = n if sig.at_end_only else sig.interval
        prog: list[ops.Op] = []
        signaled = k = 0
        wrs = data_wrs(scn, lay, c)
        for i, (first, cnt, off, length) in enumerate(wrs):
            slot_off = lay.slot_offset(c, first)
            if p.wrong_stride:  # the slot of token // next_pow2(C), its bytes those of the right slot
                pow2 = 1 << (lay.num_channels - 1).bit_length()
                dst = lay.slot_offset(c, lay.token_of(c, first) // pow2)
                prog.append(ops.Write(qp, ops.DATA, dst + off - slot_off, length, shift=slot_off - dst))
            else:
                prog.append(ops.Write(qp, ops.DATA, off, length, shift=0))
            done = first + cnt
            last_piece = i + 1 == len(wrs) or wrs[i + 1][0] >= done
            if not p.no_signal and last_piece and (done - signaled >= interval or done == n):
                if p.flush_before_signal:
                    prog.append(ops.Flush(qp))
                prog.append(_signal(p, scn, c, sqp, signaled, done, n, k, epoch))
                signaled = done
                k += 1
        if n == 0 and not p.no_signal:
            prog.append(_signal(p, scn, c, sqp, 0, 0, 0, 0, epoch))
        programs.append(prog)
    return programs



def _same(got: list[list[ops.Op]], want: list[list[ops.Op]]) -> bool:
    return got == want and all(type(a) is type(b) for g, w in zip(got, want) for a, b in zip(g, w))


@pytest.mark.parametrize("name", dispatch_protocols())
def test_sender_posts_the_reference_ops(name: str) -> None:
    p = get_protocol(name)
    assert isinstance(p, DispatchProtocol)
    for data, scn in random_decoded(name, 150, name):
        lay = p.layout(scn)
        for e in range(scn.payload.epochs):
            assert _same(p.sender(scn, lay, e), reference(p, scn, lay, e)), (name, data.hex(), e)


def test_the_zoo_covers_every_sender_option() -> None:
    """The protocols above exercise each branch of the sender, so the comparison reaches them all."""
    ps = [get_protocol(n) for n in dispatch_protocols()]
    for opt in ("wrong_stride", "flush_before_signal", "shared_word", "no_signal"):
        assert any(getattr(p, opt) for p in ps), opt


@pytest.mark.parametrize("seed", range(40))
def test_shift_is_the_layouts_slot_arithmetic(seed: int) -> None:
    rng = random.Random(seed)
    c = rng.randrange(1, 12)
    spc = rng.randrange(1, 9)
    lay = Layout(c, spc, 16 * rng.randrange(1, 6), 3, tuple(spc for _ in range(c)))
    p = get_protocol("geometry_index")
    assert isinstance(p, DispatchProtocol) and p.wrong_stride
    pow2 = 1 << (c - 1).bit_length()
    for ch in range(c):
        for first in range(spc):
            dst = lay.slot_offset(ch, lay.token_of(ch, first) // pow2)
            assert p._shift(lay, ch, first, 1) == (dst, lay.slot_offset(ch, first) - dst)
    fixed = get_protocol("geometry_index_fixed")
    assert isinstance(fixed, DispatchProtocol)
    assert fixed._shift(lay, c - 1, spc - 1, 1) == (lay.slot_offset(c - 1, spc - 1), 0)
