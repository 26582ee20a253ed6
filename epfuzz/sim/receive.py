"""The receiver step: land one TLP, wake the receiver, judge what it accepts.

`engine.replay` drives it in one visibility order; `explore` drives it in every
order the rules allow (depth first, restoring `state()` between branches). Both
therefore model the same receiver: its own stores first, the flush before reading
data (`flush_on_accept`), and data still being read for `faults.rx_lag` TLPs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.model.oracle import Violation, check_bytes, judge
from epfuzz.model.rxcache import CACHED, COHERENT, RxCache, check_map
from epfuzz.protocols.base import Consume, Layout, Protocol, Receiver
from epfuzz.sim.memory import Memory, Starts
from epfuzz.sim.nvlink import is_nvlink
from epfuzz.sim.packets import Tlp
from epfuzz.sim.spans import merged as _merged
from epfuzz.sim.spans import touched as _touched


@dataclass(init=False)
class Poll:
    position: int          # TLPs visible when the receiver looked
    trigger: int           # seq of the TLP that woke it
    accepted: list[str]
    consumes: list[Consume] = field(default_factory=list)   # what it accepted, for epfuzz.search.feedbacks
    epoch: int = 0

    def __init__(self, position: int, trigger: int, accepted: list[str], consumes: list[Consume] | None = None,
                 epoch: int = 0) -> None:
        """Written out: a dataclass's generated `__init__` is interpreted even under mypyc (`SimRun`'s)."""
        self.position, self.trigger, self.accepted, self.epoch = position, trigger, accepted, epoch
        self.consumes = [] if consumes is None else consumes


#: (consume, epoch, TLPs left to read, its region, start, end): bytes accepted and still being read (faults.rx_lag);
#: the consume's range copied out (a field read of a plain-Python `Consume` is a generic get, per TLP landed)
Reading = tuple[Consume, int, int, str, int, int]

_NOTHING: Final[frozenset[int]] = frozenset()
#: the region names, as constants to compiled code (`ops` is plain Python: `ops.DATA` is a module attribute get)
_DATA: Final = ops.DATA
_ALL: Final = 1 << 60  # the changed span [0, _ALL): "anything may have changed" (`Receiver.poll_changed`)
_TOLD: Final[dict[type, bool]] = {}  # by receiver class: does it override `Receiver.poll_changed`


class Receiving:
    """Receiver memory, the protocol's receiver, and what it is still reading or waiting on."""

    def __init__(self, scn: Scenario, proto: Protocol, layout: Layout, tlps: Sequence[Tlp],
                 polls: list[Poll] | None = None,
                 starts: Starts | None = None) -> None:
        self.rx = proto.receiver(scn, layout)
        self.proto = proto
        self.name = scn.protocol
        self.lag = scn.faults.rx_lag
        # a receiver's read orders nothing a peer GPU stored weakly: under nvlink the flush is no fix
        self.flush = proto.flush_on_accept and not is_nvlink(scn)
        #: the flush read dispatched before the poll's loads complete (`Protocol.flush_before_poll`): its
        #: horizon is `look`, what had arrived at the previous look, not what arrived before this one
        self.early = self.flush and proto.flush_before_poll
        self.look = 0
        self.polls = polls
        #: data-path TLPs not yet visible, which a flush read waits for
        self.invisible: frozenset[int] = _NOTHING
        if self.flush:
            data_target = proto.targets.get(_DATA, 0)
            self.invisible = frozenset(t.seq for t in tlps if t.region == _DATA and t.target == data_target)
        # the receiver issues its own stores (resets) first and sees its own writes: it
        # polls again only once all of this epoch's local stores have been applied
        self.local_left: dict[int, int] = {}
        for t in tlps:
            if t.local:
                self.local_left[t.epoch] = self.local_left.get(t.epoch, 0) + 1
        self.pending_local = 0
        self.reading: tuple[Reading, ...] = ()
        #: (consume, TLPs arrived when the receiver looked) awaiting the flush read
        self.deferred: tuple[tuple[Consume, int], ...] = ()
        #: TLPs arrived at the root complex so far, at least: one past the highest seq made visible (a TLP
        #: is visible only after it arrived, and TLPs arrive in seq order), what a flush read is ordered after
        self.arrived = 0
        self.epoch = -1
        self.watch = self.rx.watch
        #: a receiver told which bytes of the data region changed since its last poll (`Receiver.poll_changed`):
        #: [lo, hi) covering every data TLP landed since (all of the region at an epoch's start)
        self.told = _told(self.rx)
        self.lo, self.hi = 0, _ALL
        #: per watched region, the (starts, ends) of the byte spans the receiver's poll reads (None: the
        #: whole region); None for all: the receiver did not say (`Receiver.watch_bytes`), poll as before
        self.spans: dict[str, tuple[list[int], list[int]] | None] | None = None
        wb = self.rx.watch_bytes()
        if wb is not None:
            self.spans = {r: None if wb.get(r) is None else _merged(wb[r]) for r in self.watch}
        #: polls skipped because the TLP changed nothing the receiver reads (what tests check)
        self.skipped = 0
        #: the receiver's L2 lines over the data region, under a cached receive heap (epfuzz.model.rxcache)
        #: (the default map needs no check: a call into the interpreted `check_map` per run, issue 31)
        rx_map = getattr(proto, "rx_map", COHERENT)
        self.cache = None if rx_map == COHERENT or check_map(rx_map, self.name) != CACHED else RxCache()
        # a receiver that watches the data region (or reads it through its L2 lines) reads its bytes from its first
        # poll: made at once, from the images `starts` keeps, not on that first read (`epfuzz.sim.lazydata`)
        self.mem = Memory(layout, starts, _DATA not in self.watch and self.cache is None)

    def start_epoch(self, epoch: int) -> None:
        if not self.proto.release_at_accept:
            self.reading = ()  # the credit follows the read: the sender waits for it
        self.epoch = epoch
        self.mem.start_epoch(epoch, poison=self.proto.poison, reset=self.proto.reset_signals)
        if self.cache is not None and (self.proto.poison or epoch == 0):  # the poison is the GPU's own store
            self.cache.store(self.mem.bufs[_DATA], 0, len(self.mem.bufs[_DATA]))
        self.rx.start_epoch(epoch)
        self.lo, self.hi = 0, _ALL  # the poison, the resets, a new epoch: the next poll looks at all
        self.pending_local = self.local_left.get(epoch, 0)

    def close(self, position: int) -> Violation | None:
        """The epoch is over: a receiver still waiting for a signal hangs."""
        if self.epoch >= 0 and not self.rx.done():
            return Violation("hang", self.name, self.epoch, -1, "not every channel saw its final signal",
                             position=position)
        return None

    def state(self) -> tuple[Any, ...]:
        """Everything `land` changes except memory (see `key`/`snapshot`)."""
        return (self.rx.state(), self.reading, self.deferred, self.invisible, self.pending_local, self.arrived,
                self.look, None if self.polls is None else len(self.polls),
                None if self.cache is None else self.cache.state(), self.lo, self.hi)

    def restore(self, state: tuple[Any, ...]) -> None:
        rs, self.reading, self.deferred, self.invisible, self.pending_local, self.arrived, self.look, n, cs, *_ = state
        self.lo, self.hi = state[9], state[10]
        self.rx.restore(rs)
        if self.cache is not None:
            self.cache.restore(cs)
        if self.polls is not None:
            del self.polls[n:]

    def key(self) -> tuple[Any, ...]:
        """What the receiver's future depends on, given the set of visible TLPs (for state merging)."""
        m = self.mem.regions
        return (self.rx.state(), self.reading, self.deferred, m[ops.SIGNAL].tobytes(), m[ops.CQ].tobytes(),
                self.look if self.early else 0, None if self.cache is None else self.cache.state())

    def _verify(self, c: Consume, epoch: int, trigger: int, position: int) -> Violation | None:
        """Judge one accept; `trigger` is the seq of the TLP that woke the receiver (-1: the epoch's
        first look, which no TLP woke)."""
        mem = self.mem
        region = c.region  # a `Consume` is a plain-Python object: each field read once (a generic get each)
        if region == _DATA:
            if self.cache is not None:
                return self._verify_cached(c, epoch, trigger, position)
            off, n = c.offset, c.length
            if epoch == mem.epoch and off >= 0 and n >= 0 and off + n <= mem.data_len:
                if mem.same_as_expected(off, n, False):
                    return None  # what judge says of a whole, right range, without a numpy object (most accepts)
                done, v = mem.judge_range(c, off, n, self.name)  # the range's base known not to match
                if done:
                    if v is not None:
                        v.trigger, v.position = trigger, position
                    return v
                got = mem.lazy_range(off, n)  # a lazy region's range not wholly covered: only its bytes made
                if got is not None:
                    a, e = got
                    if a == e:
                        return None
                    v = check_bytes(c, a, e, mem.layout, self.name, epoch)  # `judge` of the range in the region
                    if v is not None:
                        v.trigger, v.position = trigger, position
                    return v
                # not judged on its range (the region made, or its image not whole slots of it): compared on the
                # region's bytes as before, where a layout whose data region outgrows its image compares the image's
                # part (review2: judging it raised, the range past the image against a shorter expected slice)
                if mem.same_as_expected(off, n):
                    return None
        # judged on the bytearray: the region's numpy views are not made for it (they cost a microsecond or two)
        v = judge(c, mem.bufs[region], mem.expected_of(epoch), mem.layout, self.name, epoch)
        if v is not None:
            v.trigger, v.position = trigger, position
        return v

    def _verify_cached(self, c: Consume, epoch: int, trigger: int, position: int) -> Violation | None:
        """Judge an accept whose read goes through the receiver's L2 lines (`epfuzz.model.rxcache`): what the
        read saw is memory with the lines it was served from laid over it."""
        assert self.cache is not None
        mem = self.mem
        buf = mem.bufs[_DATA]
        if not 0 <= c.offset <= c.offset + c.length <= len(buf):  # judge's one-line error for a bad range
            return judge(c, mem.regions[_DATA], mem.expected_of(epoch), mem.layout, self.name, epoch)
        seen, stale = self.cache.read(buf, c.offset, c.length, self.epoch, c.invalidate)
        if epoch == mem.epoch and seen == mem.expected[c.offset:c.offset + c.length].tobytes():
            return None
        region = mem.regions[_DATA].copy()
        region[c.offset:c.offset + c.length] = np.frombuffer(seen, dtype=np.uint8)
        v = judge(c, region, mem.expected_of(epoch), mem.layout, self.name, epoch)
        if v is not None:
            v.trigger, v.position = trigger, position
            if stale:  # RX-stale-line: (line offset, epoch of its fill) of the first lines served stale
                v.extra["rx_cache"] = "RX-stale-line"
                v.extra["rx_lines"] = [list(x) for x in stale[:8]]
        return v

    def wake(self, position: int) -> Violation | None:
        """The receiver's first look in an epoch, before any TLP of it lands: a spinning receiver
        reads memory as the epoch starts (a counter left by the last epoch, say), not only after
        a write it watches. With stores of its own to make first, that look follows the last one
        (`land`)."""
        if self.pending_local:
            return None
        v = self._poll(-1, position)
        return v if v is not None or not self.deferred else self._flushed(-1, position)

    def land(self, t: Tlp, position: int) -> Violation | None:
        """Make `t` visible (`position` TLPs visible after it); the first violation it reveals."""
        wakes = t.region in self.watch
        spans = self.spans
        if wakes and spans is not None and not t.local:  # a receiver that said what it reads
            lo, hi = _touched(t, spans[t.region])
            changed = self.mem.apply_word(t) if lo == t.off and hi - lo == t.length else -1
            if changed >= 0:  # a word or a CQE, all of it read: its old words said whether it changed
                wakes = changed > 0
            elif hi > lo:
                buf = self.mem.bufs[t.region]
                before = buf[lo:hi]
                self.mem.apply(t)
                wakes = not buf.startswith(before, lo)  # compared in place: no second slice
            else:
                self.mem.apply(t)
                wakes = False
            if not wakes:
                self.skipped += 1
        else:
            self.mem.apply(t)
        if self.told and t.region == _DATA:  # what the receiver's next poll is told changed
            if t.off < self.lo:
                self.lo = t.off
            if t.off + t.length > self.hi:
                self.hi = t.off + t.length
        if t.seq + t.n > self.arrived:
            self.arrived = t.seq + t.n
        if t.local:
            self.pending_local -= 1
            if self.cache is not None and t.region == _DATA:  # RX-own-store
                self.cache.store(self.mem.bufs[_DATA], t.off, t.length)
        v = self._still_reading(t, position)
        if v is not None:
            return v
        if self.flush:
            self.invisible = self.invisible - {t.seq}
        if not self.pending_local and (wakes or t.local):
            v = self._poll(t.seq, position)
            if v is not None:
                return v
        return self._flushed(t.seq, position) if self.deferred else None

    def _poll(self, trigger: int, position: int) -> Violation | None:
        """The receiver looks (woken by TLP `trigger`, or at the epoch's start: -1) and each accept
        is judged."""
        epoch = self.epoch
        if self.told:
            consumed = self.rx.poll_changed(self.mem, epoch, self.lo, self.hi)
            self.lo, self.hi = _ALL, 0  # nothing changed since this poll
        else:
            consumed = self.rx.poll(self.mem, epoch)
        if consumed and self.polls is not None:
            self.polls.append(Poll(position, trigger, [c.what for c in consumed], consumed, epoch))
        horizon = self.look if self.early else self.arrived
        self.look = self.arrived
        for c in consumed:
            if self.flush and c.region == _DATA:  # the flush read is issued now: behind all arrived so far
                self.deferred += ((c, horizon),)       # (flush_before_poll: all arrived at the previous look)
                continue
            v = self._verify(c, epoch, trigger, position)
            if v is not None:
                return v
            if self.lag and c.region == _DATA:
                self.reading += ((c, epoch, self.lag, c.region, c.offset, c.offset + c.length),)
        return None

    def _still_reading(self, t: Tlp, position: int) -> Violation | None:
        """Data accepted earlier and still being read must not change under the reader."""
        if not self.reading:
            return None
        region, lo, hi = t.region, t.off, t.off + t.length
        for c, e, _, r, a, b in self.reading:
            if region == r and lo < b and a < hi:
                v = self._verify(c, e, t.seq, position)
                if v is not None:
                    v.kind = "overwritten-while-read"
                    return v
        n = t.n
        self.reading = tuple((c, e, left - n, r, a, b) for c, e, left, r, a, b in self.reading if left - n > 0)
        return None

    def _flushed(self, trigger: int, position: int) -> Violation | None:
        """The flush read completes once every data-path TLP that arrived before it was issued is visible.

        It is issued when the receiver looked, after every TLP it could see had arrived, so after every
        TLP of a lower seq: PCIe lets no read pass posted writes that arrived before it (B2a). Bounding it
        by the seq of the TLP that woke the receiver instead let it pass data that arrived before another,
        already visible signal (a stale accept under flush_on_accept, issue 34.3)."""
        still = []
        for c, horizon in self.deferred:
            if any(s < horizon for s in self.invisible):
                still.append((c, horizon))
                continue
            v = self._verify(c, self.epoch, trigger, position)
            if v is not None:
                return v
            if self.lag:  # the read of the data starts once the flush read is back
                self.reading += ((c, self.epoch, self.lag, c.region, c.offset, c.offset + c.length),)
        self.deferred = tuple(still)
        return None


def _told(rx: Receiver) -> bool:
    """Does `rx`'s class override `Receiver.poll_changed` (the emulator then tells it what changed)?"""
    told = _TOLD.get(type(rx))
    if told is None:
        told = _TOLD[type(rx)] = getattr(type(rx), "poll_changed", None) is not Receiver.poll_changed
    return told

