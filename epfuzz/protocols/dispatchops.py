"""What the dispatch family's sender computes per channel and per signal, from plain numbers: compiled with the
core (`epfuzz.core.native.COMPILED`), so that `DispatchProtocol.sender` reads the plain-Python scenario and layout
once per call and passes their numbers here (a read from compiled code is a generic lookup, ~150 instructions,
and the sender made one per field per channel and per signal: issue 31)."""

from __future__ import annotations

from typing import Final

from epfuzz.ir import opmake, ops

FINISH: Final = 1
_DATA: Final = ops.DATA
_SIGNAL: Final = ops.SIGNAL


def pack2(finish: int, tail: int) -> int:
    """DeepEP's pack2(finish, tail): finish in the low 32 bits, tail in the high 32."""
    return ((tail & 0xFFFFFFFF) << 32) | (finish & 0xFFFFFFFF)


def stride_shift(c: int, first: int, spc: int, tb: int, nch: int) -> tuple[int, int]:
    """`DispatchProtocol._shift` with `wrong_stride`, from the layout's numbers (slots per channel `spc`, token bytes
    `tb`, `nch` channels): the slot of token // next_pow2(nch) and the source shift to the right slot's bytes."""
    off = (c * spc + first) * tb  # lay.slot_offset(c, first)
    pow2 = 1 << (nch - 1).bit_length()
    wrong = (c * spc + (first * nch + c) // pow2) * tb  # lay.slot_offset(c, lay.token_of(c, first) // pow2)
    return wrong, off - wrong


def wrs_of(n: int, per_wr: int, splits: int, tb: int, row: int) -> list[tuple[int, int, int, int]]:
    """`data_wrs` of a channel with `n` tokens whose first slot is `row`, from the numbers it reads (the
    dispatch sender reads them once per call, not once per channel from the plain-Python scenario and layout)."""
    out: list[tuple[int, int, int, int]] = []
    slot = 0
    while slot < n:
        k = min(per_wr, n - slot)
        base = (row + slot) * tb  # lay.slot_offset(channel, slot) == (row + slot) * tb
        if k == 1 and splits > 1:
            piece = (-(-tb // splits) + 15) // 16 * 16
            for off in range(0, tb, piece):
                out.append((slot, 1, base + off, min(piece, tb - off)))
        else:
            out.append((slot, k, base, k * tb))
        slot += k
    return out


def signal_op(kind: str, pack: bool, fence: bool, word: int, c: int, qp: int, old: int, tail: int, n: int, k: int,
              epoch: int) -> ops.Op:
    """`DispatchProtocol._signal` from the scenario's signal fields (`kind`, `pack`: encoding pack2, `fence`) and
    the signal word's offset, read once per sender call where `_signal` is not overridden."""
    return signal_rec(kind, pack, fence, word, c, qp, old, tail, n, k, epoch).op()


def signal_rec(kind: str, pack: bool, fence: bool, word: int, c: int, qp: int, old: int, tail: int, n: int, k: int,
               epoch: int) -> opmake.OpRec:
    """`signal_op`'s op as a record (`DispatchProtocol.sender_recs`)."""
    finish = FINISH if tail == n else 0
    if kind == "faa":
        delta = pack2(finish, tail - old) if pack else tail - old
        return opmake.rec_atomic_add(qp, _SIGNAL, word, delta, fence)
    if kind == "write":
        value = pack2(finish, tail) if pack else tail
        return opmake.rec_write_value(qp, _SIGNAL, word, value, fence)
    if kind == "write_imm":
        # IB immediate data is 32 bits: channel << 24 | tail << 1 | finish (a QP may carry several channels)
        return opmake.rec_write_imm(qp, _DATA, 0, 0, (c << 24) | (tail << 1) | finish, k, fence)
    # message: epoch + 1 (16 bits) | tail (16) | channel (8) ... finish (bit 0)
    return opmake.rec_send(qp, ((epoch + 1) << 48) | (tail & 0xFFFF) << 32 | (c << 8) | finish, k, fence)
