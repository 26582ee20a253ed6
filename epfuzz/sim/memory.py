"""Receiver memory (bytearrays with numpy views) where TLPs land.

`expected_data` is re-exported from `epfuzz.model.epoch`.
"""

from __future__ import annotations

import struct
from typing import Final

import numpy as np

from epfuzz.ir import ops
from epfuzz.model.epoch import expected_data, expected_later, start_buffers, start_images
from epfuzz.protocols.base import Layout
from epfuzz.sim.packets import A_ADD, A_COPY, A_CQE, A_FETCH, A_READ, A_STALE, A_VALUE, Tlp

MASK64: Final = (1 << 64) - 1
_U32X4: Final = struct.Struct("<4I")  # a CQE: valid, imm/value low, value high, QP
_U64: Final = struct.Struct("<Q")
_DATA: Final = ops.DATA  # `ops` is plain Python: `ops.DATA` from compiled code is a module attribute get

__all__ = ["Memory", "Starts", "expected_data"]

#: `expected_data`'s images by (id of the layout, epoch), each with its layout (kept alive, so its id is not
#: reused while the entry stands; compared by identity): its lru_cache hashes the key's layout per look-up, an
#: interpreted `Layout.__hash__` over its fields, ~4,000 instructions a fresh configuration's first run where
#: the image is already made (issue 31). Fresh configurations share layouts (`Protocol.layout` keeps one per
#: set of numbers), so these look-ups mostly find the very object; a miss asks `expected_data`, whose array this
#: shares. As many as that cache holds (a fresh stream's few hundred layouts: with fewer, the entries a stream
#: comes back to were gone); emptied when full.
_IMAGES: dict[tuple[int, int], tuple[Layout, np.ndarray]] = {}
IMAGES_MAX: Final = 256


class Starts:
    """The images of one configuration's receiver memory: what `Memory.start_epoch` writes, by (epoch, poison,
    reset), and each epoch's expected data image, made on first use and kept for the configuration's later runs.

    One per built form (`engine.Built.starts`): a schedule-only execution's memory then costs copies of images
    already made, not the layout's region sizes (an interpreted property), its epoch-start images and a lookup
    of its expected image (an interpreted `Layout.__hash__` per lookup), each run again (issue 31). Everything in
    it is a function of the layout alone, the one layout of the form whose runs share it.
    """

    __slots__ = ("sizes", "writes", "images", "_first", "_used")

    def __init__(self, sizes: dict[str, int] | None = None) -> None:
        #: `Layout.sizes`, made once (the property builds a dict per call), or given by the form's build
        self.sizes = sizes
        self.writes: dict[tuple[int, bool, bool], list[tuple[str, bytes | memoryview]]] = {}
        self.images: dict[int, np.ndarray] = {}
        self._first: list[tuple[str, bytearray]] | None = None
        self._used = False

    def first(self, layout: Layout) -> list[tuple[str, bytearray]] | None:
        """Every region as epoch 0's start leaves it (its writes are the same whatever the protocol's poison and
        reset flags: `start_images`), as bytearrays that `Memory` copies and nothing writes: a bytearray's
        `copy()` costs half of `bytearray(bytes)` at a region's size (four regions a run). None the first time:
        a fresh configuration's one run makes its buffers from the images, not a template and a copy of it."""
        out = self._first
        if out is None:
            if not self._used:
                self._used = True
                return None
            out = self._first = list(start_buffers(self.region_sizes(layout)).items())
        return out

    def region_sizes(self, layout: Layout) -> dict[str, int]:
        sizes = self.sizes
        if sizes is None:
            sizes = self.sizes = layout.sizes
        return sizes

    def start(self, layout: Layout, epoch: int, poison: bool, reset: bool) -> list[tuple[str, bytes | memoryview]]:
        key = (epoch, poison, reset)
        w = self.writes.get(key)
        if w is None:
            w = self.writes[key] = start_images(layout, epoch, poison, reset)
        return w

    def expected(self, layout: Layout, epoch: int) -> np.ndarray:
        """`expected_data(layout, epoch)`, the very array (its cache keeps layouts that several forms share)."""
        img = self.images.get(epoch)
        if img is None:
            known = _IMAGES
            key = (id(layout), epoch)
            hit = known.get(key)
            if hit is not None and hit[0] is layout:
                img = hit[1]
            else:
                # a later epoch's from the epoch before's, where that is made and `expected_later` applies
                prev = self.images.get(epoch - 1)
                later = None if prev is None else expected_later(prev, layout, epoch - 1, epoch)
                img = expected_data(layout, epoch) if later is None else later
                if len(known) >= IMAGES_MAX:
                    known.clear()
                known[key] = (layout, img)
            self.images[epoch] = img
        return img


class Memory:
    """One buffer per region; TLPs land here in visibility order.

    Each region is a `bytearray` (`bufs`, what the per-TLP paths slice and pack: a
    bytearray slice costs a fraction of a numpy one) with a numpy view over the same
    bytes (`regions`, what the oracle and exploration read and write). Views keep the
    bytearrays from resizing, and nothing here resizes them.

    Writes go through a memoryview of each buffer (`_views`), never `bytearray[a:b] = x`: CPython
    copies any `x` that is not a bytearray into a temporary bytearray first (bytearray_ass_subscript),
    so an epoch's poison of a MiB region was a MiB allocated, page-faulted, copied and copied again,
    and every landed COPY TLP two copies (issue 31). A memoryview's slice assignment is one copy, and
    it refuses a length that differs where the bytearray's would have resized the region. The views
    are made on a region's first such write: most runs write through one region's view, the data's.
    """

    __slots__ = ("layout", "bufs", "_views", "_regions", "expected", "_src", "epoch", "starts", "_at_start0")

    def __init__(self, layout: Layout, starts: Starts | None = None) -> None:
        self.layout = layout
        #: the configuration's images (`Starts`): one the caller shares between the runs of one configuration
        #: (`engine.Built.starts`), so that only its first run makes them; a run of its own otherwise
        self.starts = im = Starts() if starts is None else starts
        # made as epoch 0's start leaves them, in one copy: zeroed buffers that the first `start_epoch(0)` then
        # overwrote were two passes over regions of up to a MiB, a tenth of a guided execution on the deep zoo
        # (issue 31)
        templates = im.first(layout)
        if templates is not None:
            self.bufs = {name: image.copy() for name, image in templates}
        else:  # made as they are, not epoch 0's start images made and then copied
            self.bufs = start_buffers(im.region_sizes(layout))
        self._views: dict[str, memoryview] = {}
        #: the buffers hold epoch 0's start and nothing has landed: the first `start_epoch(0)` has nothing to write
        self._at_start0 = True
        self._regions: dict[str, np.ndarray] | None = None
        self.epoch = 0
        self._expect(im.expected(layout, 0))

    def _set_bufs(self, bufs: dict[str, bytearray]) -> None:
        self.bufs = bufs
        self._views = {}

    def _view(self, name: str) -> memoryview:
        """The memoryview every write to region `name` goes through, made on first use."""
        v = self._views.get(name)
        if v is None:
            v = self._views[name] = memoryview(self.bufs[name])
        return v

    @property
    def regions(self) -> dict[str, np.ndarray]:
        """Numpy views over `bufs`, made on first use: most runs judge every accept on the bytes alone
        (`Receiving._verify`), and four views cost as much as the rest of a run's set-up."""
        self._at_start0 = False  # a view may be written through (exploration restores memory so)
        r = self._regions
        if r is None:
            r = self._regions = {name: np.frombuffer(buf, dtype=np.uint8) for name, buf in self.bufs.items()}
        return r

    def _expect(self, image: np.ndarray) -> None:
        self.expected = image
        self._src = image.data  # a memoryview, sliced per COPY TLP: no numpy object per slice

    def expected_of(self, epoch: int) -> np.ndarray:
        """Epoch `epoch`'s expected data image (`expected_data`): the current one without a lookup."""
        if epoch == self.epoch:
            return self.expected
        return self.starts.expected(self.layout, epoch)

    def start_epoch(self, epoch: int, poison: bool = True, reset: bool = True) -> None:
        """Poison the slots with this epoch's canary; reset signal words and CQ (receiver cleanup)."""
        self.epoch = epoch
        if self._at_start0:
            self._at_start0 = False
            if epoch == 0:  # what it writes is there already, and `expected` is epoch 0's image
                return
            # a first epoch after 0: from the zeroed buffers, as if epoch 0's writes had never been made
            self._set_bufs({name: bytearray(size) for name, size in self.starts.region_sizes(self.layout).items()})
            self._regions = None
        for name, image in self.starts.start(self.layout, epoch, poison, reset):
            self._view(name)[:] = image
        self._expect(self.starts.expected(self.layout, epoch))

    def same_as_expected(self, offset: int, length: int) -> bool:
        """Do the data region's bytes [offset, offset + length) hold this epoch's image (a memcmp)?

        `startswith` at `offset` compares in place: a slice of the region was a copy of it, then an equality
        test through both buffers (twice the instructions at a slot's size). The caller keeps the range in the
        region (where it is not, a too short region's `startswith` is False where the slices' test compared
        what was there)."""
        return self.bufs[_DATA].startswith(self._src[offset:offset + length], offset)

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self.bufs[region][offset:offset + 8], "little")

    def read(self, region: str, offset: int, length: int) -> bytes:
        return bytes(self.bufs[region][offset:offset + length])

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        a, b, c, d = _U32X4.unpack_from(self.bufs[region], offset)
        return a, b, c, d

    def apply(self, t: Tlp) -> None:
        self._at_start0 = False
        a = t.action
        off = t.off
        if a == A_COPY:  # value = source shift (0: the bytes the receiver expects there)
            src = off + t.value
            n = t.length
            v = self._views.get(t.region)
            if v is None:
                v = self._view(t.region)
            v[off:off + n] = self._src[src:src + n]
            return
        buf = self.bufs[t.region]
        if a == A_VALUE:
            _U64.pack_into(buf, off, t.value & MASK64)
        elif a == A_ADD:  # atomic: one TLP, or the RMW's write-back after its read
            _U64.pack_into(buf, off, (_U64.unpack_from(buf, off)[0] + t.value) & MASK64)
        elif a == A_CQE:
            _U32X4.pack_into(buf, off, (self.epoch + 1) & 0xFFFFFFFF, t.value & 0xFFFFFFFF,
                             (t.value >> 32) & 0xFFFFFFFF, t.qp & 0xFFFFFFFF)
        elif a == A_STALE:  # the NIC read the send buffer before the payload was there (epfuzz.model.source)
            self._view(t.region)[off:off + t.length] = bytes(t.length)
        elif a != A_READ and a != A_FETCH:  # pragma: no cover
            raise AssertionError(a)

    def snapshot(self) -> dict[str, bytes]:
        return {k: bytes(v) for k, v in self.bufs.items()}

    def restore(self, snap: dict[str, bytes]) -> None:
        self._at_start0 = False
        for k, b in snap.items():
            self._view(k)[:] = b
