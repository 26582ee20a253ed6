"""Host-side judging of the GPU interpreter's log: the protocol's own Receiver decides what it accepts.

A log entry is what the consumer kernel saw when a watched word changed: the signal words (and CQ and
recv regions when the sender makes CQEs), then one class byte per data slot, taken after them (low
nibble: worst class of the slot's body chunks, high nibble: its trailer chunk; 0 = this epoch's
payload, 1 = this epoch's poison, 2 = older, 3 = other). The Receiver polls a view of each entry in
order, as it polls the sim's memory after each watched TLP; a consumed range holding any slot of a
class other than 0 is a stale accept, classified as the oracle classifies chunks. Data bytes are
rebuilt from the classes only when a receiver reads them (the in-band tag receivers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from epfuzz.backends.cuda_prog import WatchShape
from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK, canary, token_image
from epfuzz.model.oracle import Violation
from epfuzz.protocols.base import Consume, Layout, Protocol

CLASS_NAMES = {1: "poisoned", 2: "stale", 3: "corrupt"}
MAX_KEPT = 16  # violations kept with their details per run


class EntryView:
    """The MemoryView a Receiver polls: one log entry, read-only."""

    __slots__ = ("lay", "shape", "epoch", "words", "cls", "_data")

    def __init__(self, lay: Layout, shape: WatchShape, epoch: int, entry: np.ndarray) -> None:
        self.lay, self.shape, self.epoch = lay, shape, epoch
        self.words = entry[:shape.words_bytes].tobytes()
        self.cls = entry[shape.words_bytes:shape.words_bytes + shape.nslots]
        self._data: bytes | None = None

    def _region(self, region: str, offset: int, length: int) -> bytes:
        s = self.shape
        if region == ops.SIGNAL:
            base = 0
        elif s.copy_cq and region in (ops.CQ, ops.RECV):
            base = s.sig_bytes + (0 if region == ops.CQ else s.cq_bytes)
        elif region == ops.DATA:
            return self.data()[offset:offset + length]
        else:
            return bytes(length)  # never written by this sender: still zero
        return self.words[base + offset:base + offset + length]

    def data(self) -> bytes:
        """The data region as the classes say: payload, this epoch's poison, last epoch's payload, garbage."""
        if self._data is None:
            lay, e = self.lay, self.epoch
            tb = lay.token_bytes
            out = bytearray(canary(e, lay.sizes[ops.DATA]).tobytes())
            for s, b in enumerate(self.cls.tolist()):
                c, i = divmod(s, lay.slots_per_channel)
                if i >= lay.tokens_in_channel[c]:
                    continue
                good = token_image(e, 0, c, lay.token_of(c, i), tb)
                old = token_image(max(e - 1, 0), 0, c, lay.token_of(c, i), tb) if e else bytes(tb)
                parts = {0: good, 1: bytes(out[s * tb:(s + 1) * tb]), 2: old, 3: b"\xab" * tb}
                body, tail = parts[b & 0xF][:-CHUNK], parts[b >> 4][-CHUNK:]
                out[s * tb:(s + 1) * tb] = body + tail
            self._data = bytes(out)
        return self._data

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self._region(region, offset, 8), "little")

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        w = np.frombuffer(self._region(region, offset, 16), dtype="<u4")
        return int(w[0]), int(w[1]), int(w[2]), int(w[3])

    def read(self, region: str, offset: int, length: int) -> bytes:
        return self._region(region, offset, length)


def check_consume(c: Consume, cls: np.ndarray, lay: Layout, protocol: str, epoch: int) -> Violation | None:
    """The oracle on slot classes: every consumed slot must hold this epoch's payload, body and trailer."""
    v = Violation("stale-accept", protocol, epoch, c.channel, c.what, c.region, c.offset, c.length)
    if c.region != ops.DATA:  # the oracle has no expected image outside the data: always wrong
        v.bad_bytes, v.bad_chunks = c.length, [(c.offset, "stale")]
        return v
    tb = lay.token_bytes
    first, last = c.offset // tb, (c.offset + c.length - 1) // tb
    for s in range(first, last + 1):
        b = int(cls[s])
        if b:
            v.bad_chunks.append((s * tb, CLASS_NAMES[max(b & 0xF, b >> 4)]))
            v.tokens.append(lay.token_of(*divmod(s, lay.slots_per_channel)))
    if not v.bad_chunks:
        return None
    v.bad_bytes = tb * len(v.bad_chunks)
    v.tokens.sort()
    return v


@dataclass
class Verdicts:
    rounds: int = 0
    stale: int = 0
    hangs: int = 0
    overflow: int = 0
    entries: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, other: Verdicts) -> None:
        self.rounds += other.rounds
        self.stale += other.stale
        self.hangs += other.hangs
        self.overflow += other.overflow
        self.entries += other.entries
        self.examples += other.examples[:MAX_KEPT - len(self.examples)]


def judge(proto: Protocol, scn: Any, lay: Layout, shape: WatchShape, log: np.ndarray, nent: Sequence[int],
          epoch0: int) -> Verdicts:
    """Run the Receiver over each round's entries; `log` is [rounds, max_entries, entry_bytes] uint8."""
    rx = proto.receiver(scn, lay)
    out = Verdicts()
    maxe = log.shape[1]
    for k, n in enumerate(nent):
        if n < 0:  # never run: a timeout ended the launch before it
            continue
        e = epoch0 + k
        out.rounds += 1
        out.entries += n
        if n > maxe:
            out.overflow += 1
            continue
        v = _judge_round(proto, rx, lay, shape, log[k, :n], e)
        if v is not None:
            out.stale += v.kind != "hang"
            out.hangs += v.kind == "hang"
            if len(out.examples) < MAX_KEPT:
                out.examples.append(v.to_dict())
    return out


def _judge_round(proto: Protocol, rx: Any, lay: Layout, shape: WatchShape, entries: np.ndarray,
                 e: int) -> Violation | None:
    rx.start_epoch(e)
    for entry in entries:
        view = EntryView(lay, shape, e, entry)
        for c in rx.poll(view, e):
            v = check_consume(c, view.cls, lay, proto.name, e)
            if v is not None:
                return v
    if not rx.done():
        return Violation("hang", proto.name, e, -1, "the final signal words were seen, the receiver is not done")
    return None
