"""The protocol plug-in API: a sender program plus a receiver acceptance rule.

A protocol is *data plus small functions*: a name, the scenario fields it pins
(`fixed`), whether it is expected to be safe, and three callables — the memory
layout, each channel's sender program (a list of `epfuzz.ir.ops`), and a receiver
that polls memory and returns what it consumes. Backends never special-case a
protocol; they interpret ops and hand the receiver a `MemoryView`.

Stability promise: a protocol written against `Protocol`, `Layout`, `Receiver`,
`Consume` and `epfuzz.ir.ops` keeps working as the emulator grows; new model
features arrive as new scenario fields with defaults or new ops.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from typing import Protocol as TypingProtocol

from epfuzz.infra.errors import ProtocolError
from epfuzz.ir import ops
from epfuzz.ir.opmake import insert_spins, layout_of
from epfuzz.ir.payload import pad16
from epfuzz.ir.scenario import Scenario
from epfuzz.ir.slotinit import checked_init

Verdict = Literal["finding", "clean", ""]
#: what `Protocol.expect` may be: one verdict, one per preset name ("*" for the rest), or a callable
ExpectRule = Literal["finding", "clean"] | Mapping[str, str] | Callable[[Scenario], str]


@dataclass(frozen=True, slots=True)
class Layout:
    """Receiver memory shape; sizes in bytes."""

    num_channels: int
    slots_per_channel: int
    token_bytes: int
    max_signals: int
    tokens_in_channel: tuple[int, ...]

    @property
    def sizes(self) -> dict[str, int]:
        return {
            ops.DATA: self.num_channels * self.slots_per_channel * self.token_bytes,
            ops.SIGNAL: self.num_channels * 8,
            ops.CQ: self.num_channels * self.max_signals * 16,
            ops.RECV: self.num_channels * self.max_signals * 16,
        }

    def slot_offset(self, channel: int, slot: int) -> int:
        return (channel * self.slots_per_channel + slot) * self.token_bytes

    def token_of(self, channel: int, slot: int) -> int:
        """Global token index: DeepEP stripes tokens as token % num_channels."""
        return slot * self.num_channels + channel


# a receiver's poll makes these per accept: no generic attribute set per field (epfuzz.ir.slotinit); checked as the
# ops are (a plug-in's receiver makes them: `invalidate=1` is True on both paths, `length=1.5` refused on both)
@checked_init
@dataclass(frozen=True, slots=True)
class Consume:
    """Bytes the receiver reads as ready payload, right after it saw a signal."""

    region: str
    offset: int
    length: int
    channel: int
    what: str  # e.g. "slots [3, 6) of channel 1"
    #: the receiver invalidates the cache lines of these bytes before it reads them (`buffer_inv sc1`, or loads
    #: that bypass L2): under `Protocol.rx_map` "cached" the read refills them from memory (epfuzz.model.rxcache)
    invalidate: bool = False


class MemoryView(TypingProtocol):
    """What a receiver reads memory through. The emulator's (`epfuzz.sim.memory.Memory`) also exposes
    `bufs` (region -> bytearray), which the built-in receivers read directly
    (`epfuzz.protocols.memread.mem_u64`); a view without it is read through these methods."""

    def u64(self, region: str, offset: int) -> int: ...
    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]: ...
    def read(self, region: str, offset: int, length: int) -> bytes: ...


class Receiver(abc.ABC):
    """Polls signal memory the way the protocol's receiver kernel does."""

    #: regions whose change wakes the receiver (a poll after every visible TLP there)
    watch: frozenset[str] = frozenset({ops.SIGNAL})

    def watch_bytes(self) -> Mapping[str, Sequence[tuple[int, int]]] | None:
        """What this receiver's poll reads, so the emulator may skip a poll that could accept nothing.

        None (the default, and what a plug-in gets unless it says otherwise): the receiver is polled
        after every TLP that lands in a region of `watch`. A mapping promises that a poll reads only
        the watched regions, and within a region listed here only its (offset, length) ranges (a
        watched region not listed: all of it), and that a poll right after another over the same bytes
        accepts nothing and changes no state. The emulator then polls only after a TLP that changed
        some of those bytes (or a receiver-local store): the polls it skips are exactly the ones that
        would have found nothing new, so verdicts and traces do not change, only their cost.
        """
        return None

    @abc.abstractmethod
    def start_epoch(self, epoch: int) -> None: ...

    @abc.abstractmethod
    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        """Look at memory now; return every byte range accepted as ready by this poll."""

    def poll_changed(self, mem: MemoryView, epoch: int, lo: int, hi: int) -> list[Consume]:
        """`poll`, told that since this receiver's last poll no byte of the data region changed outside [lo, hi)
        (lo >= hi: none did; other regions are not told of). A receiver that overrides it promises the same
        result as `poll`'s; it may use the span to look at less. The emulator calls it, never `poll`, for a
        receiver whose class overrides it; the default (every plug-in's unless it opts in) is `poll`."""
        return self.poll(mem, epoch)

    @abc.abstractmethod
    def done(self) -> bool:
        """Has this epoch's receiver seen everything it waits for?"""

    @abc.abstractmethod
    def state(self) -> Hashable:
        """Hashable state, so exhaustive exploration can merge equal states: any hashable value (a tuple, an
        int bitmask, a frozenset), not only a tuple (new-user trial item 1: the compiled emulator took it for a
        tuple and an int crashed it); `unhashable_state` says which plug-in returned something else."""

    @abc.abstractmethod
    def restore(self, state: Any) -> None:
        """Go back to a value `state()` returned (`Any`: each receiver's own form of it)."""


def defined_at(fn: object) -> str:
    """' (at FILE:LINE, in NAME)' where the Python function or method `fn` is defined, or '' (compiled, or no
    function): how every plug-in mistake found after loading names the place in the plug-in to look."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return f" (at {code.co_filename}:{code.co_firstlineno}, in {code.co_name})" if code is not None else ""


def unhashable_state(rx: Receiver, protocol: str, e: TypeError) -> ProtocolError:
    """The plug-in's error for a `state()` that cannot be hashed (a list): exploration merges states in a set,
    and the bare TypeError read as a bug in epfuzz. Names where `state` is defined, as `receiver()` returning
    no Receiver is named (`epfuzz.protocols.registry`)."""
    at = defined_at(getattr(type(rx), "state", None))
    try:
        what = type(rx.state()).__name__
    except Exception:  # noqa: BLE001 - only the message's type name is lost
        what = "value"
    return ProtocolError(f"protocol {protocol!r}: its receiver's state() returned an unhashable {what} ({e}); "
                         f"return a hashable value (a tuple, int or frozenset){at}")


def check_state(rx: Receiver, protocol: str) -> None:
    """Hash `rx.state()` once, so a campaign refuses an unhashable one before it starts
    (`epfuzz.campaign.preflight`) rather than when it first groups its findings."""
    try:
        hash(rx.state())
    except TypeError as e:
        raise unhashable_state(rx, protocol, e) from None


@dataclass(frozen=True, slots=True)
class Pattern:
    """A bug-zoo pattern: the bug as shipped and its fix are two protocols sharing one `Pattern`."""

    number: int
    title: str


class Protocol(abc.ABC):
    """Subclass this (or instantiate `DispatchProtocol`) to fuzz your own protocol."""

    name: str = ""
    doc: str = ""
    #: scenario fields the protocol pins, by dotted path: {"knobs.mr_relaxed": True}
    fixed: dict[str, Any] = {}
    #: "finding" for a protocol as shipped with its bug, "clean" for a fixed one; where the truth
    #: depends on the platform, a mapping by preset name ("*": every other preset) or a callable
    #: of the scenario: read it through `expected(scn)`. Under nvlink a plain "clean" promises nothing for a
    #: scenario whose signal is no ordering point (platform_expect.refine); a mapping's value, "*" included, is
    #: taken as written. Mapping keys and values are checked at load (epfuzz.protocols.preflight.expect_rule)
    expect: ExpectRule = "clean"
    #: the platform preset its bug lives on, where `epfuzz fuzz NAME` and its harness (ClusterFuzzLite's
    #: too) run unless told otherwise: an NVLink bug fuzzed under the PCIe presets is clean by construction
    home_preset: str = "spec"
    #: bug sources this protocol reproduces (issues, PRs)
    sources: tuple[str, ...] = ()
    #: receiver zeroes its signal words and CQ before each epoch (behind the epoch barrier)
    reset_signals: bool = True
    #: the test harness poisons the data slots before each epoch (never while they may be in use)
    poison: bool = True
    #: the receiver returns a slot's credit when it accepts it, while it still reads it for
    #: `faults.rx_lag` more TLPs (False: the credit follows the read, behind the epoch barrier)
    release_at_accept: bool = False
    #: after a signal, the receiver flushes (a read on the data's PCIe path) before reading the data
    flush_on_accept: bool = False
    #: with `flush_on_accept`: the flush read may be dispatched before the completion poll's loads are
    #: done (an x86 write-combining mapping with no mfence between them, NCCL a12d73a8), so it is ordered
    #: only after what had arrived at the receiver's previous look, not after the completion it follows
    flush_before_poll: bool = False
    #: how the receive heap (the data region) is mapped for the receiver's reads (epfuzz.model.rxcache):
    #: "coherent" (reads see every landed byte), "cached" (a GPU L2 that a NIC's writes bypass: a line read
    #: once serves later reads until invalidated, mori #610), "uncached" (hipDeviceMallocUncached: memory)
    rx_map: str = "coherent"
    #: PCIe completer of each region (0 = one path for all); different completers are unordered
    targets: dict[str, int] = {}
    #: the bug-zoo pattern this protocol is the buggy (expect "finding") or fixed ("clean") side of
    pattern: Pattern | None = None
    #: scenario fields that tell one bug from another in crash dedup (None: epfuzz's default list)
    signature_knobs: tuple[str, ...] | None = None

    def _take_options(self, options: dict[str, Any], names: tuple[str, ...], kind: str) -> None:
        """Set the named class-level settings given as keyword options (removing them from `options`);
        any option left is a TypeError naming `kind`: a misspelt option must not pass silently."""
        for attr in names:
            if attr in options:
                setattr(self, attr, options.pop(attr))
        if options:
            raise TypeError(f"unknown {kind} options: {sorted(options)}")

    def expected(self, scn: Scenario | None = None) -> Verdict:
        """The verdict this protocol promises for `scn` (None: the promise of the PCIe presets, or ""
        where it depends on the scenario); "" too for a scenario it makes no promise for (a fixed form
        under nvlink whose signal is not fenced: epfuzz.protocols.platform_expect)."""
        rule = self.expect
        if isinstance(rule, str):  # a word decided on the PCIe model: what it means per preset (platform_expect)
            from epfuzz.protocols.platform_expect import refine

            got: object = refine(rule, scn, self.name)
            if got == "":
                return ""
        elif scn is None:
            return ""
        elif callable(rule):
            got = rule(scn)
        else:
            got = rule.get(scn.preset, rule.get("*"))
        if got not in ("finding", "clean"):
            where = f" for preset {scn.preset!r}" if scn is not None else ""
            raise ProtocolError(f'protocol {self.name!r}: expect gives {got!r}{where}, not "finding" or "clean"')
        return got

    def epoch_prologue(self, scn: Scenario, layout: Layout, epoch: int) -> list[tuple[str, int, int, bool]]:
        """Receiver stores before epoch `epoch`'s traffic: (region, offset, u64 value, ordered)."""
        return []

    def layout(self, scn: Scenario) -> Layout:
        p = scn.payload
        sig = scn.signal
        return _layout(p.num_tokens, p.hidden_bytes, p.scale_bytes, p.meta_bytes, scn.topology.num_channels,
                       sig.at_end_only, sig.interval)

    @abc.abstractmethod
    def sender(self, scn: Scenario, layout: Layout, epoch: int) -> list[list[ops.Op]]:
        """One op list per channel, in that channel's program order."""

    @abc.abstractmethod
    def receiver(self, scn: Scenario, layout: Layout) -> Receiver: ...


def _reference_layout(tokens: int, hidden: int, scale: int, meta: int, c: int, at_end_only: bool,
                      interval: int) -> Layout:
    """What `_layout` makes, in plain Python (tests/zoo/test_layoutmake.py holds the compiled one to it)."""
    token_bytes = pad16(hidden) + pad16(scale) + pad16(meta)
    per = tuple([len(range(ch, tokens, c)) for ch in range(c)])
    slots = max(1, max(per))
    if at_end_only:
        interval = slots
    max_signals = max(1, -(-slots // max(1, interval))) + 1
    return Layout(c, slots, token_bytes, max_signals, per)


#: `Protocol.layout` of these numbers (tokens, hidden, scale, meta, channels, at_end_only, interval), made once per
#: distinct set: every fresh scenario asks, and a Layout is immutable, so scenarios with equal numbers may share
#: one; a miss is made by compiled code (`epfuzz.ir.opmake.layout_of`), the cache calling it with no frame between
_layout: Callable[[int, int, int, int, int, bool, int], Layout] = functools.lru_cache(maxsize=1024)(
    functools.partial(layout_of, Layout))


def apply_spins(programs: Sequence[Sequence[ops.Op]], scn: Scenario) -> list[list[ops.Op]]:
    """Insert the scenario's GPU spins; shared by every backend so faults mean the same (the sim's build calls
    `insert_spins` itself, with the spins it read once)."""
    return insert_spins(programs, scn.faults.spins)
