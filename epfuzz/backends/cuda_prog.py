"""A protocol as data for the GPU interpreter (cuda_interp.cu): op records, payload tables, final images.

Everything here is pure Python, so CI checks the encoding without a GPU. A round of the interpreter is
one epoch of the protocol; epochs run by the hundred thousand, so the sender's programs are encoded
once with every value written as `v0 + step * epoch` (checked on several epochs: a sender whose ops
are not affine in the epoch is refused), and the payload is computed on the GPU from the epoch: the
chunk words directly, the trailer's CRC32 from the slot's CRC at epoch 0 and one table entry per set
bit of the epoch (CRC32 is affine over GF(2) for messages of one length).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from epfuzz.infra.errors import Unsupported
from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK, token_image
from epfuzz.ir.scenario import Scenario
from epfuzz.model.rxcache import COHERENT
from epfuzz.protocols.base import Layout, Protocol, apply_spins

HERE = Path(__file__).resolve().parent
REGION = {ops.DATA: 0, ops.SIGNAL: 1, ops.CQ: 2, ops.RECV: 3}
OP_WRITE, OP_VALUE, OP_ADD, OP_IMM, OP_SEND, OP_SPIN, OP_FENCE = range(1, 8)
#: Write(tma=True) (cp.async.bulk, the async proxy) and ProxyFence: sm_90 kernels only (cuda_interp.cu)
OP_TMA, OP_PFENCE = 8, 9
TMA_OPS = (OP_TMA, OP_PFENCE)
TMA_MIN_CC = 90
REC = 8  # int64 fields per record: code, region, offset, length, value, step, aux, qp
MASK64 = (1 << 64) - 1
MAX_SLOTS = 512
MAX_WATCH_WORDS = 2048
FENCE = {"none": 0, "threadfence": 1, "threadfence_system": 2}
STORE = {"plain": 0, "volatile": 1, "release_sys": 2}
#: the kernel's parameter vector, in order (cuda_interp.cu reads P[P_<NAME>])
PARAM_FIELDS = ("C", "NOPS", "SPC", "TOKEN_BYTES", "NSLOTS", "SRC", "DATA_BYTES", "SIG_BYTES", "CQ_BYTES",
                "COPY_CQ", "WATCH", "FENCE", "STORE", "SYNC", "SIG_LAST", "SPIN_CYCLES", "POISON", "RESET",
                "EARLY", "NPROLOG", "MAX_ENTRIES", "ENTRY_BYTES", "R0", "R1", "TIMEOUT_NS")
PROBE_EPOCHS = (0, 1, 2, 3, 1000)


def kernel_source() -> str:
    """cuda_interp.cu with the parameter indices defined (one list, here, for both sides)."""
    defs = "".join(f"#define P_{n} {i}\n" for i, n in enumerate(PARAM_FIELDS))
    return defs + (HERE / "cuda_interp.cu").read_text()


def _s64(v: int) -> int:
    v &= MASK64
    return v - (1 << 64) if v >> 63 else v


def _record(op: ops.Op, channel: int, lay: Layout) -> tuple[int, ...]:
    """One op as (code, region, offset, length, value, aux, qp); value is the epoch-dependent field."""
    if isinstance(op, ops.Write):
        if op.region != ops.DATA or op.length % CHUNK or op.offset % CHUNK or op.shift % CHUNK:
            raise Unsupported(f"cuda: a Write must move whole 16-byte chunks of the data region ({op})")
        return (OP_TMA if op.tma else OP_WRITE, 0, op.offset, op.length, 0, op.shift, 0)
    if isinstance(op, ops.WriteValue):
        return (OP_VALUE, REGION[op.region], op.offset, 8, op.value, 0, 0)
    if isinstance(op, ops.AtomicAdd):
        return (OP_ADD, REGION[op.region], op.offset, 8, op.delta, 0, 0)
    cq_off = lambda slot: (channel * lay.max_signals + slot) * 16  # noqa: E731 - as the sim's responder
    if isinstance(op, ops.WriteImm):
        if op.length and (op.region != ops.DATA or op.length % CHUNK or op.offset % CHUNK):
            raise Unsupported(f"cuda: WRITE_WITH_IMM data must be whole chunks of the data region ({op})")
        return (OP_IMM, 0, op.offset, op.length, op.imm, cq_off(op.cq_slot), op.qp)
    if isinstance(op, ops.Send):
        return (OP_SEND, 3, op.slot * 16, 8, op.value, cq_off(op.slot), op.qp)
    if isinstance(op, ops.Spin):
        return (OP_SPIN, 0, 0, 0, op.ns, 0, 0)
    if isinstance(op, ops.Flush):
        if op.stale:
            raise Unsupported("cuda: a quiet on a stale frontier (Flush(stale=True)) has no GPU form: the "
                              "interpreter's Flush is a fence, with no NIC post index to snapshot (sim only)")
        return (OP_FENCE, 0, 0, 0, 0, 0, 0)
    if isinstance(op, ops.CeCopy | ops.CeValue):
        raise Unsupported(f"cuda: copy-engine batches are not driven by the interpreter (it issues SM stores and "
                          f"fences; a cudaMemcpyBatchAsync's order is the sim's CE-batch clause) ({op})")
    if isinstance(op, ops.Read):
        raise Unsupported(f"cuda: an RDMA READ has no GPU form: the interpreter issues a peer GPU's stores and fences, "
                          f"and a peer load orders nothing of the READ layer's PCIe/IB clauses ({op})")
    if isinstance(op, ops.ProxyFence):
        return (OP_PFENCE, 0, 0, 0, 0, 0, 0)
    if isinstance(op, ops.SOURCE_OPS):
        raise Unsupported(f"cuda: {type(op).__name__} is a GPU access to a send buffer that a NIC reads by DMA; "
                          "the interpreter's payload is the GPU's own stores into the peer, with no NIC read "
                          "(epfuzz.model.source: sim only)")
    raise Unsupported(f"cuda: no GPU form for op {op!r}")


def uses_tma(programs: np.ndarray) -> bool:
    """Whether the records hold a TMA Write or a ProxyFence (which only an sm_90 kernel can run)."""
    return bool(np.isin(programs[:, :, 0], TMA_OPS).any())


def tma_refusal(cc: int, device: int = 0) -> str:
    """Why a GPU of compute capability `cc` (e.g. 80) cannot run TMA ops; "" where it can."""
    if cc >= TMA_MIN_CC:
        return ""
    return (f"TMA bulk stores (Write(tma=True), cp.async.bulk) and ProxyFence (fence.proxy.async) need "
            f"sm_{TMA_MIN_CC} or newer; GPU {device} is sm_{cc}, and a st in their place would test another "
            f"protocol")


def encode_programs(proto: Protocol, scn: Scenario, lay: Layout) -> np.ndarray:
    """[channels, ops + 1, REC] int64 records (a zero code ends a list), values affine in the epoch.

    A protocol may say why the interpreter cannot judge it (`cuda_refusal`, e.g. a receiver that reads
    a stamp inside a slot's body, which the log keeps as one class): refused here, before any GPU work."""
    why = getattr(proto, "cuda_refusal", "")
    if why:
        raise Unsupported(f"cuda: {proto.name}: {why}")
    rx_map = getattr(proto, "rx_map", COHERENT)
    if rx_map != COHERENT:
        raise Unsupported(f"cuda: {proto.name}'s receive heap is mapped {rx_map} (epfuzz.model.rxcache: a GPU L2 that "
                          "a NIC's writes bypass); the interpreter's consumer reads through an NVIDIA L2, which "
                          "every writer's stores reach (sim only)")
    runs = {e: [[_record(op, c, lay) for op in prog]
                for c, prog in enumerate(apply_spins(proto.sender(scn, lay, e), scn))] for e in PROBE_EPOCHS}
    base, nxt = runs[0], runs[1]
    for e, progs in runs.items():
        if [len(p) for p in progs] != [len(p) for p in base]:
            raise Unsupported(f"cuda: {proto.name}'s sender changes shape between epochs")
        for c, prog in enumerate(progs):
            for k, rec in enumerate(prog):
                step = (nxt[c][k][4] - base[c][k][4]) & MASK64
                if rec[:4] + rec[5:] != base[c][k][:4] + base[c][k][5:] or \
                        rec[4] & MASK64 != (base[c][k][4] + step * e) & MASK64:
                    raise Unsupported(f"cuda: {proto.name}'s op {k} of channel {c} is not affine in the epoch")
    nops = max([len(p) for p in base] + [0]) + 1
    out = np.zeros((lay.num_channels, nops, REC), dtype=np.int64)
    for c, prog in enumerate(base):
        for k, (code, region, off, length, v0, aux, qp) in enumerate(prog):
            step = (nxt[c][k][4] - v0) & MASK64
            out[c, k] = (code, region, off, length, _s64(v0), _s64(step), aux, qp)
    return out


def encode_prologue(proto: Protocol, scn: Scenario, lay: Layout) -> np.ndarray:
    """[n, 4] (region, offset, value, ordered): the receiver's stores before every epoch but the first
    (at least one row: the kernel's count is `len(proto.epoch_prologue(...))`, not the array's)."""
    if proto.epoch_prologue(scn, lay, 0):
        raise Unsupported(f"cuda: {proto.name} stores before epoch 0; the interpreter starts from zeroed memory")
    first = proto.epoch_prologue(scn, lay, 1)
    if any(proto.epoch_prologue(scn, lay, e) != first for e in PROBE_EPOCHS[2:]):
        raise Unsupported(f"cuda: {proto.name}'s receiver stores differ between epochs")
    rows = [(REGION[r], off, _s64(v), int(ordered)) for r, off, v, ordered in first]
    return np.array(rows or [(0, 0, 0, 0)], dtype=np.int64).reshape(-1, 4)


@lru_cache(maxsize=64)
def crc_deltas(body_bytes: int) -> tuple[int, ...]:
    """crc32(body with bit b of every chunk's epoch word set) ^ crc32(zeros), for b in 0..31."""
    zero = zlib.crc32(bytes(body_bytes))
    out = []
    for b in range(32):
        words = np.zeros((body_bytes // CHUNK, 4), dtype="<u4")
        words[:, 0] = 1 << b
        out.append(zlib.crc32(words.tobytes()) ^ zero)
    return tuple(out)


def crc_at(crc0: int, deltas: tuple[int, ...], epoch: int) -> int:
    """The trailer CRC of a token in `epoch`, from its CRC at epoch 0 (what the kernel computes)."""
    for b in range(32):
        if (epoch >> b) & 1:
            crc0 ^= deltas[b]
    return crc0


def payload_tables(lay: Layout, src: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slot CRCs at epoch 0, the 32 per-bit deltas, tokens per channel) for the kernel's payload()."""
    crc0 = np.zeros(lay.num_channels * lay.slots_per_channel, dtype=np.uint32)
    for c in range(lay.num_channels):
        for i in range(lay.tokens_in_channel[c]):
            img = token_image(0, src, c, lay.token_of(c, i), lay.token_bytes)
            crc0[c * lay.slots_per_channel + i] = np.frombuffer(img[-CHUNK:], dtype="<u4")[3]
    deltas = np.array(crc_deltas(lay.token_bytes - CHUNK), dtype=np.uint32)
    return crc0, deltas, np.array(lay.tokens_in_channel, dtype=np.int32)


@dataclass(frozen=True)
class WatchShape:
    """What a log entry holds: the signal words (and CQ + recv when the sender makes CQEs), then slots."""

    sig_bytes: int
    cq_bytes: int
    copy_cq: bool
    nslots: int

    @property
    def words_bytes(self) -> int:
        return self.sig_bytes + (2 * self.cq_bytes if self.copy_cq else 0)

    @property
    def entry_bytes(self) -> int:
        return -(-(self.words_bytes + self.nslots) // 16) * 16


def watch_shape(lay: Layout, programs: np.ndarray) -> WatchShape:
    sizes = lay.sizes
    copy_cq = bool(np.isin(programs[:, :, 0], (OP_IMM, OP_SEND)).any())
    stores = np.isin(programs[:, :, 0], (OP_VALUE, OP_ADD)) & np.isin(programs[:, :, 1], (REGION[ops.CQ],
                                                                                           REGION[ops.RECV]))
    if stores.any() and not copy_cq:  # the consumer would never see them: a false hang
        raise Unsupported("cuda: the consumer's log copies the cq and recv regions only for a sender that makes "
                          "CQEs (WRITE_WITH_IMM, SEND); this one writes a value into them with plain ops")
    shape = WatchShape(sizes[ops.SIGNAL], sizes[ops.CQ], copy_cq, lay.num_channels * lay.slots_per_channel)
    if shape.nslots > MAX_SLOTS or shape.words_bytes // 4 > MAX_WATCH_WORDS:
        raise Unsupported(f"cuda: the interpreter's consumer keeps at most {MAX_SLOTS} slots and "
                          f"{MAX_WATCH_WORDS} signal words in shared memory")
    return shape


def _apply(img: dict[str, np.ndarray], rec: np.ndarray, epoch: int) -> None:
    code, region, off, _, v0, step, aux, qp = (int(x) for x in rec)
    v = (v0 + step * epoch) & MASK64
    name = ops.REGIONS[region]

    def put64(reg: str, o: int, val: int) -> None:
        img[reg][o // 8] = np.uint64(val & MASK64)

    def cqe(o: int) -> None:
        put64(ops.CQ, o, (epoch + 1) | ((v & 0xFFFFFFFF) << 32))
        put64(ops.CQ, o + 8, (v >> 32) | (qp << 32))

    if code == OP_VALUE:
        put64(name, off, v)
    elif code == OP_ADD:
        put64(name, off, int(img[name][off // 8]) + v)
    elif code == OP_IMM:
        cqe(aux)
    elif code == OP_SEND:
        put64(ops.RECV, off, v)
        cqe(aux)


def final_images(proto: Protocol, lay: Layout, programs: np.ndarray, prologue: np.ndarray, nprolog: int,
                 shape: WatchShape) -> tuple[np.ndarray, np.ndarray]:
    """(base, step) u64 words: the watched image once epoch e's sender is done is base + step * e.

    Applied in program order per channel (adds commute; a word has one writer in every protocol we
    run); checked to be affine in the epoch, since the kernel compares against base + step * e.
    """
    regions = (ops.SIGNAL, ops.CQ, ops.RECV) if shape.copy_cq else (ops.SIGNAL,)
    img = {r: np.zeros(lay.sizes[r] // 8, dtype=np.uint64) for r in (ops.SIGNAL, ops.CQ, ops.RECV)}
    finals = []
    for e in range(PROBE_EPOCHS[-1] + 1):
        if proto.reset_signals or e == 0:
            for a in img.values():
                a[:] = 0
        if e:
            for region, off, v, _ in prologue.tolist()[:nprolog]:
                img[ops.REGIONS[region]][off // 8] = np.uint64(v & MASK64)
        for prog in programs:
            for rec in prog:
                if rec[0]:
                    _apply(img, rec, e)
        if e in PROBE_EPOCHS:
            finals.append((e, np.concatenate([img[r] for r in regions]).copy()))
    base = finals[0][1]
    step = finals[1][1] - base
    for e, f in finals:
        if not np.array_equal(f, base + step * np.uint64(e)):
            raise Unsupported(f"cuda: {proto.name}'s final signal words are not affine in the epoch")
    return base, step
