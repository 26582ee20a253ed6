"""Receiver memory (bytearrays with numpy views) where TLPs land.

`expected_data` is re-exported from `epfuzz.model.epoch`.
"""

from __future__ import annotations

import struct
from typing import Final

import numpy as np

from epfuzz.ir import ops
from epfuzz.ir.payload import canary_view
from epfuzz.model.epoch import expected_data, expected_range, joins
from epfuzz.model.oracle import Violation
from epfuzz.protocols.base import Consume, Layout
from epfuzz.sim.lazydata import Bufs, Lazy, Starts
from epfuzz.sim.packets import A_ADD, A_COPY, A_CQE, A_FETCH, A_READ, A_STALE, A_VALUE, Tlp
from epfuzz.sim.stalediff import range_diff

MASK64: Final = (1 << 64) - 1
_U32X4: Final = struct.Struct("<4I")  # a CQE: valid, imm/value low, value high, QP
_U64: Final = struct.Struct("<Q")
_DATA: Final = ops.DATA  # `ops` is plain Python: `ops.DATA` from compiled code is a module attribute get

__all__ = ["Memory", "Starts", "expected_data"]

class Memory:
    """One buffer per region; TLPs land here in visibility order.

    Each region is a `bytearray` (`bufs`, what the per-TLP paths slice and pack: a
    bytearray slice costs a fraction of a numpy one) with a numpy view over the same
    bytes (`regions`, what the oracle and exploration read and write). Views keep the
    bytearrays from resizing, and nothing here resizes them. The data region is made only
    when something reads it (`Lazy`): until then a landed COPY of the expected bytes records its range.

    Writes go through a memoryview of each buffer (`_views`), never `bytearray[a:b] = x`: CPython
    copies any `x` that is not a bytearray into a temporary bytearray first (bytearray_ass_subscript),
    so an epoch's poison of a MiB region was a MiB allocated, page-faulted, copied and copied again,
    and every landed COPY TLP two copies (issue 31). A memoryview's slice assignment is one copy, and
    it refuses a length that differs where the bytearray's would have resized the region. The views
    are made on a region's first such write.
    """

    __slots__ = ("layout", "bufs", "_bufs", "_views", "_regions", "_exp", "_src", "epoch", "starts", "_at_start0",
                 "_lz")

    def __init__(self, layout: Layout, starts: Starts | None = None, lazy: bool = True) -> None:
        """`lazy` False: the data region made at once (its receiver reads it: `Receiving`)."""
        self.layout = layout
        #: the configuration's images (`Starts`): one the caller shares between the runs of one configuration
        #: (`engine.Built.starts`), so that only its first run makes them; a run of its own otherwise
        self.starts = im = Starts() if starts is None else starts
        sizes = im.region_sizes(layout)
        # made as epoch 0's start leaves them: the data region epoch 0's poison (`Lazy`), the others zeroed
        size = sizes[_DATA]
        lz = self._lz = Lazy(layout, im, size, {})
        if lazy and lz.on:
            lz.bufs = self._bufs = {name: bytearray(n) for name, n in sizes.items() if name != _DATA}
            #: region -> bytearray: `_bufs`, or while the data region is lazy a dict that makes it on first look
            self.bufs: dict[str, bytearray] = Bufs(lz)
        else:
            lz.on = False
            lz.bufs = self._bufs = self.bufs = {name: im.poisoned(n) if name == _DATA else bytearray(n)
                                                for name, n in sizes.items()}
        self._views: dict[str, memoryview] = {}
        #: the buffers hold epoch 0's start and nothing has landed: the first `start_epoch(0)` has nothing to write
        self._at_start0 = True
        self._regions: dict[str, np.ndarray] | None = None
        self.epoch = 0
        #: this epoch's expected image and a memoryview of it (sliced per COPY TLP), looked up on first use
        self._exp: np.ndarray | None = None
        self._src: memoryview | None = None
        if not im.checked:
            # a layout whose image is made token by token (a plug-in's) has it made now, as every run did before the
            # data region was lazy: one it cannot make raises here, not only in the runs that read the region
            # (review: such runs passed silently). Marked only once made: a form whose run raised raises again.
            if not joins(layout):
                _ = self.expected
            im.checked = True

    def _make(self) -> bytearray:
        """The data region's bytes, made now; `bufs` the plain dict from now on."""
        buf = self._lz.make()
        self.bufs = self._bufs
        return buf

    def _buf(self, name: str) -> bytearray:
        """Region `name`'s bytes, the data region made if it is not yet (a KeyError for a region there is not)."""
        b = self._bufs.get(name)
        if b is None:
            if name == _DATA and self._lz.on:
                return self._make()
            b = self._bufs[name]
        return b

    def _view(self, name: str) -> memoryview:
        """The memoryview every write to region `name` goes through, made on first use."""
        v = self._views.get(name)
        if v is None:
            v = self._views[name] = memoryview(self._buf(name))
        return v

    @property
    def regions(self) -> dict[str, np.ndarray]:
        """Numpy views over `bufs`, made on first use: most runs judge every accept on the bytes alone
        (`Receiving._verify`), and four views cost as much as the rest of a run's set-up."""
        self._at_start0 = False  # a view may be written through (exploration restores memory so)
        r = self._regions
        if r is None:
            if self._lz.on:
                self._make()
            r = self._regions = {name: np.frombuffer(buf, dtype=np.uint8) for name, buf in self._bufs.items()}
        return r

    @property
    def expected(self) -> np.ndarray:
        """This epoch's expected data image (`expected_data`)."""
        img = self._exp
        if img is None:
            img = self._exp = self.starts.expected(self.layout, self.epoch)
            self._src = img.data
        return img

    def _source(self) -> memoryview:
        src = self._src
        if src is None:
            self._src = src = self.expected.data
        return src

    def expected_of(self, epoch: int) -> np.ndarray:
        """Epoch `epoch`'s expected data image (`expected_data`): the current one without a lookup."""
        if epoch == self.epoch:
            return self.expected
        return self.starts.expected(self.layout, epoch)

    @property
    def data_len(self) -> int:
        """The data region's length, without making it."""
        lz = self._lz
        return lz.size if lz.on else len(self._bufs[_DATA])

    def start_epoch(self, epoch: int, poison: bool = True, reset: bool = True) -> None:
        """Poison the slots with this epoch's canary; reset signal words and CQ (receiver cleanup)."""
        lz = self._lz
        if self._at_start0:
            self._at_start0 = False
            if epoch == 0:  # what it writes is there already, and `expected` is epoch 0's image
                self.epoch = 0
                return
            # a first epoch after 0: from the zeroed buffers, as if epoch 0's writes had never been made
            fresh = {name: bytearray(size) for name, size in self.starts.region_sizes(self.layout).items()
                     if name != _DATA or not lz.on}
            lz.restart(lz.epoch, -1)
            lz.bufs = self._bufs = fresh
            self.bufs = Bufs(lz) if lz.on else fresh
            self._views, self._regions = {}, None
        writes = self.starts.start(self.layout, epoch, poison, reset)
        if not lz.on:  # made through `bufs` (`Bufs.__missing__`): the plain dict from now on
            self.bufs = self._bufs
        elif writes and writes[0][0] == _DATA:  # the poison, kept as the region's base
            lz.restart(epoch, epoch)
            writes = writes[1:]
        elif lz.lo:  # the old epoch's landed bytes stay: made now, from its image
            self._make()
        else:
            lz.epoch = epoch
        for name, image in writes:
            self._view(name)[:] = image
        self.epoch = epoch
        self._exp = None
        self._src = None

    def same_as_expected(self, offset: int, length: int, make: bool = True) -> bool:
        """Do the data region's bytes [offset, offset + length) hold this epoch's image?

        Where the range lies in what landed from the image since the epoch's start (`Lazy.covers`), yes, with
        no byte read; otherwise a memcmp: `startswith` at `offset` compares in place (a slice of the region was a
        copy of it, then an equality test through both buffers). The caller keeps the range in the region (where
        it is not, a too short region's `startswith` is False where the slices' test compared what was there).
        `make` False: a lazy region's range not wholly covered answers False, nothing made (`lazy_range` next)."""
        lz = self._lz
        if lz.on:
            if lz.covers(offset, offset + length):
                return True
            if not make:
                return False
        return self._buf(_DATA).startswith(self._source()[offset:offset + length], offset)

    def lazy_range(self, offset: int, length: int) -> tuple[bytes, bytes] | None:
        """While the data region is lazy: its bytes [offset, offset + length) (a range in it, not wholly covered)
        and this epoch's expected bytes there, with neither the region nor the epoch's whole image made: all that
        a stale accept's verdict reads (`judge` slices both), where making them cost ~100k instructions a fresh
        scenario with one (issue 31). None where the region is made or the image is not whole slots of it
        (`expected_range`): the caller reads the region as before."""
        lz = self._lz
        if not lz.on or lz.epoch != self.epoch:
            return None
        end = offset + length
        img = self._exp
        if img is None:
            img = self.starts.known(self.layout, self.epoch)
        if img is not None and len(img) == lz.size:
            e = img[offset:end].tobytes()
        else:
            got = expected_range(self.layout, self.epoch, offset, length, lz.size)
            if got is None:
                return None
            e = got
        # the region's bytes: its base (poison, or zeros) but where a covered range holds the expected bytes
        base = lz.base
        fill: bytes | memoryview = bytes(length) if base < 0 else canary_view(base, lz.size)[offset:end]
        lo, hi = lz.lo, lz.hi
        parts: list[bytes | memoryview] = []
        at = offset
        for i in range(len(lo)):
            a, b = lo[i], hi[i]
            if a >= end:
                break
            if b <= at:
                continue
            if a > at:
                parts.append(fill[at - offset:a - offset])
            b = min(b, end)
            parts.append(e[max(a, at) - offset:b - offset])
            at = b
        if at < end:
            parts.append(fill[at - offset:])
        return b"".join(parts), e

    def judge_range(self, c: Consume, offset: int, length: int, protocol: str) -> tuple[bool, Violation | None]:
        """`lazy_range` then `check_bytes` of the range, where the configuration has its `RangeDiff` (from the
        range's second stale accept on; `epfuzz.sim.stalediff`): (True, the verdict), no bytes compared; else
        (False, None), nothing done."""
        lz = self._lz
        if not lz.on or lz.epoch != self.epoch:
            return False, None
        rd = range_diff(self.starts, self.layout, self.epoch, lz.base, offset, length, lz.size, self._exp)
        if rd is None:
            return False, None
        return True, rd.judge(c, lz.lo, lz.hi, offset, self.layout, protocol, self.epoch)

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self._buf(region)[offset:offset + 8], "little")

    def read(self, region: str, offset: int, length: int) -> bytes:
        return bytes(self._buf(region)[offset:offset + length])

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        a, b, c, d = _U32X4.unpack_from(self._buf(region), offset)
        return a, b, c, d

    def apply(self, t: Tlp) -> None:
        self._at_start0 = False
        a = t.action
        off = t.off
        if a == A_COPY:  # value = source shift (0: the bytes the receiver expects there)
            n = t.length
            region = t.region
            lz = self._lz
            if lz.on and region == _DATA and t.value == 0 and off >= 0 and n > 0 and off + n <= lz.size:
                lz.cover(off, off + n)
                return
            src = off + t.value
            v = self._views.get(region)
            if v is None:
                v = self._view(region)
            s = self._src
            if s is None:
                s = self._source()
            v[off:off + n] = s[src:src + n]
            return
        if a in (A_READ, A_FETCH):  # reads write nothing: no look-up, and no lazy data region made for one
            return
        buf = self._bufs.get(t.region)
        if buf is None:
            buf = self._buf(t.region)
        if a == A_VALUE:
            _U64.pack_into(buf, off, t.value & MASK64)
        elif a == A_ADD:  # atomic: one TLP, or the RMW's write-back after its read
            _U64.pack_into(buf, off, (_U64.unpack_from(buf, off)[0] + t.value) & MASK64)
        elif a == A_CQE:
            _U32X4.pack_into(buf, off, (self.epoch + 1) & 0xFFFFFFFF, t.value & 0xFFFFFFFF,
                             (t.value >> 32) & 0xFFFFFFFF, t.qp & 0xFFFFFFFF)
        elif a == A_STALE:  # the NIC read the send buffer before the payload was there (epfuzz.model.source)
            self._view(t.region)[off:off + t.length] = bytes(t.length)
        else:  # pragma: no cover
            raise AssertionError(a)

    def apply_word(self, t: Tlp) -> int:
        """`apply` of a VALUE or ADD TLP of 8 bytes or a CQE of 16 inside its region: 1 where it changed a byte of
        its range, else 0, told by the words it replaces (`Receiving.land`: no copy of the bytes before and no
        compare after); -1, nothing applied, for any other TLP."""
        a = t.action
        off = t.off
        if a in (A_VALUE, A_ADD):
            if t.length != 8:
                return -1
            buf = self._buf(t.region)
            if not 0 <= off <= len(buf) - 8:
                return -1
            self._at_start0 = False
            old: int = _U64.unpack_from(buf, off)[0]
            new = (t.value if a == A_VALUE else old + t.value) & MASK64
            _U64.pack_into(buf, off, new)
            return int(new != old)
        if a == A_CQE:
            if t.length != 16:
                return -1
            buf = self._buf(t.region)
            if not 0 <= off <= len(buf) - 16:
                return -1
            self._at_start0 = False
            w0, w1, w2, w3 = _U32X4.unpack_from(buf, off)
            v = t.value
            n0, n1, n2, n3 = (self.epoch + 1) & 0xFFFFFFFF, v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF, t.qp & 0xFFFFFFFF
            _U32X4.pack_into(buf, off, n0, n1, n2, n3)
            return int(w0 != n0 or w1 != n1 or w2 != n2 or w3 != n3)
        return -1

    def snapshot(self) -> dict[str, bytes]:
        if self._lz.on:
            self._make()
        return {k: bytes(v) for k, v in self._bufs.items()}

    def restore(self, snap: dict[str, bytes]) -> None:
        self._at_start0 = False
        for k, b in snap.items():
            self._view(k)[:] = b
