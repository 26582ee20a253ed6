"""Bug-zoo pattern 3: in-band tag at the end of the payload instead of a signal.

`inband_tag` is the bug as shipped (no signal at all: the receiver trusts an in-band tag at the end
of each slot), `inband_tag_fixed` the fix as shipped. Both are the dispatch sender
(`epfuzz.protocols.dispatch`) with fields pinned and the receiver defined here; `sources` on each
names the issues and commits they reproduce.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK, token_checksum_ok
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Consume, Layout, MemoryView, Pattern, Receiver
from epfuzz.protocols.consmake import consume
from epfuzz.protocols.dispatch import DispatchProtocol
from epfuzz.protocols.memread import mem_read, mem_u32x4, num_str

_DATA: Final = ops.DATA  # a constant to compiled code (`ops` is plain Python: a module attribute get per use)
#: `_tag_struct` by (slots, token bytes)
_TAGS: Final[dict[tuple[int, int], struct.Struct]] = {}
_TAGS_KEPT: Final = 256
_TAG: Final = struct.Struct("<I4xI")  # one slot's tag words 0 and 2 (`TagReceiver.poll_changed`)


@mypyc_attr(allow_interpreted_subclasses=True)
class TagReceiver(Receiver):
    """Polls each slot's last 16 bytes (DeepEP keeps topk_idx there) for this epoch's stamp.

    With `checksum`, it also checks the token's CRC32 before accepting (the fix:
    trust the data, not a tag that may land before the rest of it).
    """

    def __init__(self, scn: Scenario, lay: Layout, checksum: bool = False) -> None:
        # set here, not in the class body: mypyc compiles this class, and a frozenset is no default it can store
        self.watch = frozenset({ops.DATA})
        self.lay = lay
        self.checksum = checksum
        self.accepted = [[False] * n for n in lay.tokens_in_channel]
        #: reads every slot's tag words 0 and 2 (epoch, token) from the data region's bytes at `tb - 16`, made at
        #: the first poll over a view with `bufs`: one struct call per poll, where a struct call per slot not yet
        #: accepted made polls quadratic in the tokens (a quarter of the protocol's time, issue 31)
        self._tags: struct.Struct | None = None

    def watch_bytes(self) -> Mapping[str, Sequence[tuple[int, int]]] | None:
        """Each slot's tag (its last 16 bytes); with `checksum` the whole slot, which the check reads.
        A slot is accepted once, so a poll over unchanged bytes accepts nothing new."""
        if type(self) is not TagReceiver:
            return None
        if self.checksum:
            return {}
        lay = self.lay
        return {ops.DATA: tuple((lay.slot_offset(c, i) + lay.token_bytes - CHUNK, CHUNK)
                                for c, n in enumerate(lay.tokens_in_channel) for i in range(n))}

    def start_epoch(self, epoch: int) -> None:
        self.accepted = [[False] * n for n in self.lay.tokens_in_channel]

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        lay = self.lay
        tb = lay.token_bytes
        spc = lay.slots_per_channel
        nch = lay.num_channels
        out: list[Consume] = []
        tags: tuple[int, ...] | None = None
        read = False  # the tags are read at the first slot not accepted yet
        for c, row in enumerate(self.accepted):
            for i, done in enumerate(row):
                if done:
                    continue
                off = (c * spc + i) * tb  # lay.slot_offset(c, i)
                if not read:
                    tags, read = self._tag_words(mem, nch * spc, tb), True
                if tags is not None:
                    w0, w2 = tags[2 * (c * spc + i)], tags[2 * (c * spc + i) + 1]
                else:
                    w = mem_u32x4(mem, _DATA, off + tb - CHUNK)
                    w0, w2 = w[0], w[2]
                if w0 != epoch or w2 != i * nch + c:  # lay.token_of(c, i)
                    continue
                if self.checksum and not token_checksum_ok(mem_read(mem, _DATA, off, tb)):
                    continue
                row[i] = True
                out.append(consume(_DATA, off, tb, c, f"slot {num_str(i)} of channel {num_str(c)} (tag seen)"))
        return out

    def poll_changed(self, mem: MemoryView, epoch: int, lo: int, hi: int) -> list[Consume]:
        """`poll` over the slots with a byte in [lo, hi) only: a slot not accepted at the last poll did not show
        this epoch's tag (or checksum) then, and shows it now only if its bytes changed since (a poll per data
        TLP read every slot's tag: polls quadratic in the tokens, issue 31). The whole `poll` for a subclass,
        a span past the region or a view without `bufs`."""
        lay = self.lay
        tb = lay.token_bytes
        spc = lay.slots_per_channel
        nch = lay.num_channels
        bufs: dict[str, bytearray] | None = getattr(mem, "bufs", None)
        if type(self) is not TagReceiver or bufs is None or tb < CHUNK or lo < 0 or hi > nch * spc * tb \
                or len(bufs[_DATA]) < nch * spc * tb:
            return self.poll(mem, epoch)
        out: list[Consume] = []
        if hi <= lo:
            return out
        data = bufs[_DATA]
        accepted = self.accepted
        for g in range(lo // tb, (hi - 1) // tb + 1):  # the slots [lo, hi) touches, in `poll`'s order
            c = g // spc
            i = g - c * spc
            row = accepted[c]
            if i >= len(row) or row[i]:
                continue
            off = g * tb
            w: tuple[int, ...] = _TAG.unpack_from(data, off + tb - CHUNK)
            if w[0] != epoch or w[1] != i * nch + c:
                continue
            if self.checksum and not token_checksum_ok(bytes(data[off:off + tb])):
                continue
            row[i] = True
            out.append(consume(_DATA, off, tb, c, f"slot {num_str(i)} of channel {num_str(c)} (tag seen)"))
        return out

    def _tag_words(self, mem: MemoryView, n: int, tb: int) -> tuple[int, ...] | None:
        """Words 0 and 2 of the tag (the last 16 bytes) of each of the n slots of `tb` bytes, in slot order (None: a
        view without `bufs`, or a data region shorter than the layout's, read through `mem_u32x4`)."""
        bufs: dict[str, bytearray] | None = getattr(mem, "bufs", None)
        if bufs is None or n == 0 or tb < CHUNK or len(bufs[_DATA]) < n * tb:
            return None
        st = self._tags
        if st is None:
            st = self._tags = _tag_struct(n, tb)
        words: tuple[int, ...] = st.unpack_from(bufs[_DATA], tb - CHUNK)
        return words

    def done(self) -> bool:
        return all(all(r) for r in self.accepted)

    def state(self) -> tuple[Any, ...]:
        return tuple(tuple(r) for r in self.accepted)

    def restore(self, state: tuple[Any, ...]) -> None:
        self.accepted = [list(r) for r in state]


def _tag_struct(n: int, tb: int) -> struct.Struct:
    """The struct that reads words 0 and 2 of the last 16 bytes of each of n slots of `tb` bytes, from the first
    slot's, made once per (n, tb) (`memread._words`' way): a struct of up to 3n codes compiled per receiver was
    ~4k instructions of every fresh scenario (issue 31)."""
    st = _TAGS.get((n, tb))
    if st is None:
        if len(_TAGS) >= _TAGS_KEPT:  # a long run meets many shapes: the memo stays small
            _TAGS.clear()
        st = _TAGS[(n, tb)] = struct.Struct("<" + f"I4xI{tb - 12}x" * (n - 1) + "I4xI")
    return st


PATTERN = Pattern(3, "in-band tag at the end of the payload instead of a signal")

BAD = DispatchProtocol(
    "inband_tag", "no signal: the receiver polls the tag at the END of each slot (topk_idx) and trusts the "
    "slot once it shows this epoch; one MTU packet is several MemWr TLPs that RO may reorder",
    {"knobs.mr_relaxed": True}, "finding", ("DeepEP #437", "DeepEP #491"),
    no_signal=True, receiver_cls=TagReceiver,
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "inband_tag_fixed", "the same tag, but the slot is accepted only when the whole token's checksum matches",
    {"knobs.mr_relaxed": True}, "clean", ("DeepEP #491",),
    no_signal=True, receiver_cls=TagReceiver, receiver_opts={"checksum": True},
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
