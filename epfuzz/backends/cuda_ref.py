"""A sequentially consistent Python model of cuda_interp.cu, for CI without a GPU.

It runs the same records, tables and final images the kernels get, one op at a time with the channels
interleaved round-robin, and logs what the consumer would log (an entry whenever the watched words or,
when the data is watched, the slot classes change). On a GPU every access is visible in this order or
a weaker one; so this is the interpreter with no reordering at all, which is what the CPU tests need:
logic bugs (stale epochs, wrong slots, a shared counter, erased signals) show, ordering bugs do not.
"""

from __future__ import annotations

import numpy as np

from epfuzz.backends.cuda_prog import (
    MASK64,
    OP_ADD,
    OP_IMM,
    OP_SEND,
    OP_SPIN,
    OP_TMA,
    OP_VALUE,
    OP_WRITE,
    WatchShape,
    crc_at,
)
from epfuzz.ir import ops
from epfuzz.ir.payload import CANARY_TAG, CHUNK
from epfuzz.protocols.base import Layout


def payload_chunk(lay: Layout, crc0: np.ndarray, deltas: tuple[int, ...], e: int, off: int) -> np.ndarray:
    """The kernel's payload(): the 16 bytes at data offset `off` in epoch e, as four u32."""
    tb, spc, C = lay.token_bytes, lay.slots_per_channel, lay.num_channels
    s = off // tb
    c, i = divmod(s, spc)
    j = (off - s * tb) // CHUNK
    if c >= C or i >= lay.tokens_in_channel[c]:
        return np.array([CANARY_TAG | (e & 0xFFFF), 0xFFFFFFFF, 0xFFFFFFFF, 0xDEADBEEF], dtype="<u4")
    last = j == tb // CHUNK - 1
    w3 = crc_at(int(crc0[s]), deltas, e) if last else j
    return np.array([e, c, i * C + c, w3], dtype="<u4")


def classes(lay: Layout, mem: np.ndarray, crc0: np.ndarray, deltas: tuple[int, ...], e: int) -> np.ndarray:
    """The consumer's slot class bytes over data memory `mem` (uint8)."""
    per = lay.token_bytes // CHUNK
    n = lay.num_channels * lay.slots_per_channel
    out = np.zeros(n, dtype=np.uint8)
    words = mem.view("<u4").reshape(-1, 4)
    for s in range(n):
        body = tail = 0
        for j in range(per):
            a = words[s * per + j]
            w = payload_chunk(lay, crc0, deltas, e, (s * per + j) * CHUNK)
            if (a == w).all():
                k = 0
            elif a[3] == 0xDEADBEEF and (int(a[0]) & 0xFFFF0000) == CANARY_TAG:
                k = 1 if (int(a[0]) & 0xFFFF) == (e & 0xFFFF) else 2
            else:
                k = 2 if int(a[0]) < e else 3
            if j == per - 1:
                tail = k
            else:
                body = max(body, k)
        out[s] = body | (tail << 4)
    return out


class RefMachine:
    """Receiver memory plus the consumer's change detection; `run_epoch` returns the epoch's entries."""

    def __init__(self, lay: Layout, shape: WatchShape, programs: np.ndarray, prologue: np.ndarray, nprolog: int,
                 crc0: np.ndarray, deltas: tuple[int, ...], *, poison: bool, reset: bool, data_watched: bool):
        self.lay, self.shape, self.programs = lay, shape, programs
        self.prologue = prologue[:nprolog].tolist()
        self.crc0, self.deltas = crc0, deltas
        self.poison, self.reset, self.data_watched = poison, reset, data_watched
        self.mem = {r: np.zeros(size, dtype=np.uint8) for r, size in lay.sizes.items()}

    def watched(self) -> bytes:
        m = self.mem
        words = m[ops.SIGNAL].tobytes()
        return words + (m[ops.CQ].tobytes() + m[ops.RECV].tobytes() if self.shape.copy_cq else b"")

    def _put64(self, region: str, off: int, v: int) -> None:
        self.mem[region][off:off + 8] = np.frombuffer((v & MASK64).to_bytes(8, "little"), dtype=np.uint8)

    def _exec(self, rec: np.ndarray, e: int) -> None:
        code, region, off, length, v0, step, aux, qp = (int(x) for x in rec)
        v = (v0 + step * e) & MASK64
        name = ops.REGIONS[region]
        if code in (OP_WRITE, OP_TMA, OP_IMM) and length:  # a TMA Write lands as a Write, in this order
            shift = aux if code != OP_IMM else 0
            for k in range(length // CHUNK):
                chunk = payload_chunk(self.lay, self.crc0, self.deltas, e, off + shift + CHUNK * k)
                self.mem[ops.DATA][off + CHUNK * k:off + CHUNK * (k + 1)] = chunk.view(np.uint8)
        if code == OP_VALUE:
            self._put64(name, off, v)
        elif code == OP_ADD:
            self._put64(name, off, int.from_bytes(self.mem[name][off:off + 8].tobytes(), "little") + v)
        elif code in (OP_IMM, OP_SEND):
            if code == OP_SEND:
                self._put64(ops.RECV, off, v)
            cqe = np.array([e + 1, v & 0xFFFFFFFF, v >> 32, qp], dtype="<u4")
            self.mem[ops.CQ][aux:aux + 16] = cqe.view(np.uint8)

    def _state(self, e: int) -> tuple[bytes, bytes]:
        cls = classes(self.lay, self.mem[ops.DATA], self.crc0, self.deltas, e)
        return self.watched(), (cls.tobytes() if self.data_watched else b"")

    def run_epoch(self, e: int) -> list[np.ndarray]:
        m = self.mem
        if self.poison or e == 0:
            m[ops.DATA][:] = np.tile(np.array([CANARY_TAG | (e & 0xFFFF), 0xFFFFFFFF, 0xFFFFFFFF, 0xDEADBEEF],
                                              dtype="<u4").view(np.uint8), m[ops.DATA].size // CHUNK)
        if self.reset or e == 0:
            for r in (ops.SIGNAL, ops.CQ, ops.RECV):
                m[r][:] = 0
        rows = self.prologue if e else []
        for region, off, v, ordered in rows:
            if ordered:
                self._put64(ops.REGIONS[region], off, v)
        last = self._state(e)
        # the receiver's unordered stores: issued right after the release, seen by it together
        steps: list[tuple[str, object]] = [("local", [r for r in rows if not r[3]])] if rows else []
        progs = [[rec for rec in prog if rec[0]] for prog in self.programs]
        for k in range(max((len(p) for p in progs), default=0)):
            steps += [("op", p[k]) for p in progs if k < len(p)]
        entries = []
        for kind, what in steps:
            if kind == "local":
                for region, off, v, _ in what:  # type: ignore[attr-defined]
                    self._put64(ops.REGIONS[region], off, v)
            elif int(what[0]) != OP_SPIN:  # type: ignore[index]
                self._exec(what, e)  # type: ignore[arg-type]
            now = self._state(e)
            if now != last:
                last = now
                cls = classes(self.lay, m[ops.DATA], self.crc0, self.deltas, e)
                entries.append(np.frombuffer(now[0] + cls.tobytes(), dtype=np.uint8))
        return entries
