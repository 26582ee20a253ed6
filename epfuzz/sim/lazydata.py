"""Receiver memory's images shared by a configuration's runs (`Starts`) and its data region made only when something
reads it (`Lazy`, `Bufs`), for `epfuzz.sim.memory.Memory` (issue 31)."""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, ValuesView
from typing import Any, Final, SupportsIndex

import numpy as np

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import ops
from epfuzz.ir.payload import CHUNK, canary_view
from epfuzz.model.epoch import expected_data, expected_later, start_images
from epfuzz.protocols.base import Layout

_DATA: Final = ops.DATA
#: no range covered: shared by every `Lazy` until its first cover (nothing mutates an empty one)
_NONE: Final[list[int]] = []

__all__ = ["Bufs", "Lazy", "Starts"]

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

    One per built form (`engine.Built.starts`): a schedule-only execution's memory then costs no
    layout's region sizes (an interpreted property), its epoch-start images and a lookup
    of its expected image (an interpreted `Layout.__hash__` per lookup), each run again (issue 31). Everything in
    it is a function of the layout alone, the one layout of the form whose runs share it.
    """

    __slots__ = ("sizes", "writes", "images", "_poison", "_used", "checked", "diffs", "diff_bytes")

    def __init__(self, sizes: dict[str, int] | None = None) -> None:
        #: `Layout.sizes`, made once (the property builds a dict per call), or given by the form's build
        self.sizes = sizes
        self.writes: dict[tuple[int, bool, bool], list[tuple[str, bytes | memoryview]]] = {}
        self.images: dict[int, np.ndarray] = {}
        self._poison: bytearray | None = None
        self._used = False
        #: a memory of the layout has made its expected image where `joins` says it might not make (`Memory`)
        self.checked = False
        #: stale accepts' ranges: (base, epoch, offset, length) -> `stalediff.RangeDiff`, or False (asked once)
        self.diffs: dict[tuple[int, int, int, int], object] = {}
        #: the range bytes of the `RangeDiff`s in `diffs` (`stalediff.DIFF_BYTES_MAX` bounds them)
        self.diff_bytes = 0

    def poisoned(self, size: int) -> bytearray:
        """A data region of `size` bytes as epoch 0's start leaves it, a buffer of its own: from the second call
        on a copy of a template that nothing writes (a bytearray's `copy()` costs half of `bytearray(view)` at a
        region's size); the first call's is made as it is (a fresh configuration's one run makes no template)."""
        out = self._poison
        if out is None:
            if not self._used:
                self._used = True
                return bytearray(canary_view(0, size))
            out = self._poison = bytearray(canary_view(0, size))
        return out.copy()

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

    def known(self, layout: Layout, epoch: int) -> np.ndarray | None:
        """`expected(layout, epoch)` where it is made already (by this configuration or another of the layout),
        None where not: nothing made."""
        img = self.images.get(epoch)
        if img is None:
            hit = _IMAGES.get((id(layout), epoch))
            if hit is not None and hit[0] is layout:
                img = self.images[epoch] = hit[1]
        return img

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


class Lazy:
    """The data region while nothing has read its bytes (issue 31): `base`'s poison (-1: zeros) except the ranges
    `[lo[i], hi[i])` (sorted, disjoint, not touching), which hold epoch `epoch`'s expected image. A landed COPY of
    the expected bytes (source shift 0) only adds its range, so a run whose receiver never reads the data region
    copies no payload and makes no expected image unless an accept is not wholly covered (`Memory.same_as_expected`
    then compares bytes). The bytes are made (`make`) the first time anything asks for them and the region stays
    made from then on (`on` False): what lands later is copied in as before. `bufs` is the memory's regions, the
    data region in it once made. Only regions of whole 16-byte chunks are kept so (a poison is whole chunks)."""

    __slots__ = ("on", "base", "lo", "hi", "epoch", "size", "layout", "starts", "bufs")

    def __init__(self, layout: Layout, starts: Starts, size: int, bufs: dict[str, bytearray]) -> None:
        self.on = size % CHUNK == 0
        self.base = 0
        self.lo: list[int] = _NONE
        self.hi: list[int] = _NONE
        self.epoch = 0
        self.size = size
        self.layout = layout
        self.starts = starts
        self.bufs = bufs

    def make(self) -> bytearray:
        """The region's bytes as they stand, put first in `bufs` (the layout's order); lazy no more."""
        self.on = False
        base = self.base
        if base < 0:
            buf = bytearray(self.size)
        elif base == 0:
            buf = self.starts.poisoned(self.size)
        else:
            buf = bytearray(canary_view(base, self.size))
        lo, hi = self.lo, self.hi
        if lo:
            img = self.starts.expected(self.layout, self.epoch).data
            view = memoryview(buf)
            for i in range(len(lo)):
                a, b = lo[i], hi[i]
                view[a:b] = img[a:b]
            self.lo = self.hi = _NONE
        bufs = self.bufs
        rest = list(bufs.items())
        bufs.clear()
        bufs[_DATA] = buf
        for k, v in rest:
            bufs[k] = v
        return buf

    def restart(self, epoch: int, base: int) -> None:
        """The region is `base`'s poison again (an epoch's start), its covered ranges epoch `epoch`'s."""
        self.base, self.epoch = base, epoch
        self.lo = self.hi = _NONE

    def cover(self, a: int, b: int) -> None:
        """[a, b) now holds the expected image (a < b)."""
        lo, hi = self.lo, self.hi
        k = len(lo)
        if k == 0:
            self.lo, self.hi = [a], [b]
            return
        if a > hi[k - 1]:  # past the last range: TLPs land mostly in order
            lo.append(a)
            hi.append(b)
            return
        if a >= lo[k - 1]:  # in or right after the last range (a run's next TLP): it grows, no search
            if b > hi[k - 1]:
                hi[k - 1] = b
            return
        i, j = 0, k
        while i < j:  # the first range ending at a or after
            m = (i + j) >> 1
            if hi[m] < a:
                i = m + 1
            else:
                j = m
        if lo[i] > b:
            lo.insert(i, a)
            hi.insert(i, b)
            return
        e = i
        while e + 1 < k and lo[e + 1] <= b:
            e += 1
        if a < lo[i]:
            lo[i] = a
        hi[i] = hi[e] if hi[e] > b else b
        if e > i:
            del lo[i + 1:e + 1]
            del hi[i + 1:e + 1]

    def covers(self, a: int, b: int) -> bool:
        """Does [a, b) lie in one covered range (an empty one: yes)?"""
        if b <= a:
            return True
        lo = self.lo
        i, j = 0, len(lo)
        while i < j:  # past the last range starting at a or before
            m = (i + j) >> 1
            if lo[m] <= a:
                i = m + 1
            else:
                j = m
        return i > 0 and self.hi[i - 1] >= b


@mypyc_attr(native_class=False)
class Bufs(dict[str, bytearray]):
    """`Memory.bufs` while the data region is lazy: region -> bytearray, whose `__missing__` makes the data region
    (`Lazy.make`) and copies in `Lazy.bufs`; what reads the whole dict does so first. Present regions are looked up
    as in any dict, a little slower (a dict subclass's `__getitem__` is its Python-level slot): `Memory.bufs` is
    the plain dict once the region is made, and the memory's own code reads that one.

    Every dict method answers as on the plain dict of a memory that made the region at once, and a write is made in
    `Lazy.bufs` (that dict) too: dict's own C methods skip `__missing__` and see only this dict's entries."""

    def __init__(self, lazy: Lazy) -> None:
        super().__init__(lazy.bufs)
        self.lazy = lazy

    def __missing__(self, key: Any) -> bytearray:
        lz = self.lazy
        if key == _DATA and lz.on:
            lz.make()
        buf = lz.bufs[key]  # KeyError for a region there is not
        self.whole()
        return buf

    def whole(self) -> None:
        lz = self.lazy
        if lz.on:
            lz.make()
        if dict.__len__(self) != len(lz.bufs):
            dict.clear(self)
            dict.update(self, lz.bufs)

    def get(self, key: Any, default: object = None) -> object:  # type: ignore[override]
        self.whole()
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        self.whole()
        return dict.__contains__(self, key)

    def __iter__(self) -> Iterator[str]:
        self.whole()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.whole()
        return dict.__len__(self)

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        self.whole()
        return dict.keys(self)

    def values(self) -> ValuesView[bytearray]:  # type: ignore[override]
        self.whole()
        return dict.values(self)

    def items(self) -> ItemsView[str, bytearray]:  # type: ignore[override]
        self.whole()
        return dict.items(self)

    def __reversed__(self) -> Iterator[str]:
        self.whole()
        return dict.__reversed__(self)

    # dict's own `setdefault`, `pop`, ... skip `__missing__` and change only this dict's entries: each is made in the
    # memory's regions, the data region made first, as in the plain dict `bufs` is once made (`setdefault` returns a
    # region there, never replaced by its default; a key set here alone was dropped by the next `whole`, a deleted
    # one came back, `clear` was undone)
    def setdefault(self, key: Any, default: Any = None) -> Any:
        return self._write(dict.setdefault, key, default)

    def pop(self, key: Any, *default: Any) -> Any:
        return self._write(dict.pop, key, *default)

    def popitem(self) -> tuple[Any, Any]:
        return self._write(dict.popitem)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._write(dict.__setitem__, key, value)

    def __delitem__(self, key: Any) -> None:
        self._write(dict.__delitem__, key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._write(dict.update, *args, **kwargs)  # once: an iterator of pairs is read by one update only

    def __ior__(self, other: Any) -> Bufs:  # type: ignore[override]
        self._write(dict.__ior__, other)
        return self

    def clear(self) -> None:
        self._write(dict.clear)

    def _write(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.whole()
        out = method(self.lazy.bufs, *args, **kwargs)
        dict.clear(self)
        dict.update(self, self.lazy.bufs)
        return out

    def __or__(self, other: Any) -> dict[str, bytearray]:  # type: ignore[override]
        self.whole()
        return dict.__or__(self, other)

    def __ror__(self, other: Any) -> dict[str, bytearray]:  # type: ignore[override]
        self.whole()
        return dict.__ror__(self, other)

    @classmethod
    def fromkeys(cls, keys: Iterable[Any], value: Any = None) -> dict[str, Any]:  # type: ignore[override]
        return dict.fromkeys(keys, value)  # a plain dict's (dict's calls `Bufs()`, which needs a `Lazy`)

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (dict, (self.copy(),))  # copied or pickled: the plain dict (dict's shared the memory's regions)

    def copy(self) -> dict[str, bytearray]:
        self.whole()
        return dict(dict.items(self))

    def __eq__(self, other: object) -> bool:
        self.whole()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        self.whole()
        return dict.__repr__(self)
