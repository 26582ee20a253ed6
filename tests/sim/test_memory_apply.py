"""`Memory.apply` (each TLP action's write) against the plain bytearray writes it replaced (issue 31: writes
now go through memoryviews and struct packing, one copy each instead of a temporary bytearray and a
second copy), on random in-bounds TLPs over a deep and a small layout; no write changes a region's size."""

from __future__ import annotations

import random

from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build
from epfuzz.sim.memory import MASK64, Memory, Starts
from epfuzz.sim.packets import Tlp, TlpAction


def _reference_apply(bufs: dict[str, bytearray], src: bytes, epoch: int, t: Tlp) -> None:
    buf, off, a = bufs[t.region], t.off, t.action
    if a == TlpAction.COPY:
        buf[off:off + t.length] = src[off + t.value:off + t.value + t.length]
    elif a == TlpAction.VALUE:
        buf[off:off + 8] = (t.value & MASK64).to_bytes(8, "little")
    elif a == TlpAction.ADD:
        buf[off:off + 8] = ((int.from_bytes(buf[off:off + 8], "little") + t.value) & MASK64).to_bytes(8, "little")
    elif a == TlpAction.CQE:
        buf[off:off + 16] = b"".join(x.to_bytes(4, "little") for x in (
            (epoch + 1) & 0xFFFFFFFF, t.value & 0xFFFFFFFF, (t.value >> 32) & 0xFFFFFFFF, t.qp & 0xFFFFFFFF))
    elif a == TlpAction.STALE:
        buf[off:off + t.length] = bytes(t.length)


def _random_tlp(rng: random.Random, mem: Memory) -> Tlp:
    t = Tlp()
    t.action = rng.choice([TlpAction.COPY, TlpAction.VALUE, TlpAction.ADD, TlpAction.CQE, TlpAction.STALE,
                           TlpAction.READ, TlpAction.FETCH])
    width = {TlpAction.VALUE: 8, TlpAction.ADD: 8, TlpAction.CQE: 16}.get(t.action)
    regions = [r for r, b in mem.bufs.items() if len(b) >= (width or 16)]
    t.region = "data" if t.action in (TlpAction.COPY, TlpAction.STALE) else rng.choice(regions)
    size = len(mem.bufs[t.region])
    t.length = width or rng.randrange(1, min(size, 512) + 1)
    t.off = rng.randrange(0, size - t.length + 1)
    t.value = (rng.randrange(0, t.off + 1) * -1 if rng.random() < 0.3 else 0) if t.action == TlpAction.COPY \
        else rng.randrange(-(1 << 63), 1 << 64)
    t.qp = rng.randrange(0, 1 << 33)
    return t


def test_every_action_writes_what_the_bytearray_writes_did() -> None:
    rng = random.Random(31)
    for name, raw in (("deep_gdr", b"\x07" * 40), ("dispatch_any", b"\x05\x01")):
        layout = build(codec.decode(raw, name, "spec"), get_protocol(name)).layout
        for epoch in (0, 1, 3):
            mem = Memory(layout, Starts())
            mem.start_epoch(epoch)
            ref = {k: bytearray(v) for k, v in mem.snapshot().items()}
            src = mem.expected.tobytes()
            sizes = {k: len(v) for k, v in mem.bufs.items()}
            for _ in range(400):
                t = _random_tlp(rng, mem)
                mem.apply(t)
                _reference_apply(ref, src, epoch, t)
                assert mem.bufs[t.region] == ref[t.region], (t.action, t.region, t.off, t.length, t.value)
            assert {k: len(v) for k, v in mem.bufs.items()} == sizes
