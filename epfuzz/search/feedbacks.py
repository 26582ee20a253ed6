"""Feedbacks: named feature functions over one execution's trace (LibAFL's feedback component).

Line coverage of the emulator saturates within seconds (every branch of the
adversary and the responder runs on the first few inputs), after which a new
ordering looks like an old one. The default feedbacks name what an ordering *did*,
in terms the protocol's own receiver gives, not one protocol's defence:

- `roles` of TLPs, read off the run: the TLP that woke an accepting poll (the
  signal the receiver watched), a TLP in a watched region, and for data inside a
  range the receiver accepted, which part of that range it holds (its head, its
  tail, the middle) and which part of its slot. A trailer check, a header stamp, a
  middle stamp or a CQ phase bit are then all "a part of a read range", whichever
  the protocol reads;
- `reorder`: (later role, earlier role, rule cell, region pair, same bytes or not)
  for every inversion the adversary made;
- `reads`: per accepted range and part (head/mid/tail), the signed distance in TLPs
  between that part's last landing and the accept (slack; < 0: it landed after the
  signal the receiver polled), log2-bucketed, the run's minimum per (phase, part),
  plus reads-from of a violation (this epoch's bytes, an older epoch's, poison);
- `state`: a channel's progress (none, part, all of its slots accepted) before
  and after an accepting poll that moved it, with the set of states the other
  channels are in, per epoch (the tuple of every channel's state made 3^C
  features: on deep_other_qp 90% of all features, so most kept inputs were new
  only in which channel finished first, and energy went to them);
- `shape`: which kinds of work request each channel posts on its data QP or on
  another, whether a channel has no tokens, how many epochs ran (FuzzFactory's
  waypoints: no ordering, but the corners of the configuration deep bugs live in);
- `lines` (not on by default): line coverage of the execution (sys.settrace), so
  a run can be compared with what libFuzzer's line coverage would keep.

A feedback is `Feedback(name, fn)`; `fn(run) -> set[Feature]`. `--feedback
module:attr` adds one (a Feedback or a list of them). Features are tuples whose first
element is the feedback's own tag, so two feedbacks never share a key.
`feature_index` hashes a key with CRC32 (not `hash()`) so every process (fork,
merge, jobs) maps a key to the same libFuzzer counter.
"""

from __future__ import annotations

import sys
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from epfuzz.ir import ops

# the `reads` feedback's loops: compiled with the emulator (epfuzz.core.native.COMPILED), plain Python where it
# is not; the functions keep their names here
from epfuzz.search.featcore import _bucket, _landings, _progress, accept_features  # noqa: F401
from epfuzz.sim.engine import SimRun
from epfuzz.sim.packets import TlpAction

POOL = 1 << 14          # libFuzzer counters reserved for semantic features
_ACTION = {TlpAction.COPY: "data", TlpAction.VALUE: "value", TlpAction.ADD: "add", TlpAction.READ: "read",
           TlpAction.CQE: "cqe", TlpAction.FETCH: "fetch", TlpAction.STALE: "stale"}
Feature = tuple[Any, ...]


@dataclass(frozen=True)
class Feedback:
    """One named feature function; `lines` feedbacks need the execution wrapped (see `LineCoverage`)."""

    name: str
    fn: Callable[[SimRun], set[Feature]]
    doc: str = ""


# ------------------------------------------------------------------ what the receiver reads and watches
@dataclass
class Reads:
    """What the run's receiver read and what woke it: the base of every role."""

    ranges: dict[tuple[int, str], list[tuple[int, int]]]   # (epoch, region) -> accepted (start, end)
    triggers: set[int]                                     # seqs of TLPs that woke an accepting poll
    watched: set[str]                                      # regions those TLPs landed in


#: id(TLP list) -> (the list, its seq -> TLP): a built form's arrival order is shared by every run over it
#: (`SimRun.tlps`, never changed once built), so the map is made once per arrival order, least recently
#: used out; the list is held, so an id is never another list's while its entry lives
_SEQS: OrderedDict[int, tuple[list[Any], dict[int, Any]]] = OrderedDict()
SEQS = 64


def _seqs(tlps: list[Any]) -> dict[int, Any]:
    key = id(tlps)
    hit = _SEQS.get(key)
    if hit is not None and hit[0] is tlps:
        _SEQS.move_to_end(key)
        return hit[1]
    seqs = {t.seq: t for t in tlps}
    _SEQS[key] = (tlps, seqs)
    if len(_SEQS) > SEQS:
        _SEQS.popitem(last=False)
    return seqs


def reads_of(run: SimRun) -> Reads:
    ranges: dict[tuple[int, str], list[tuple[int, int]]] = {}
    triggers: set[int] = set()
    watched: set[str] = set()
    seqs: dict[int, Any] | None = None
    for p in run.polls:
        trigger = p.trigger
        if trigger >= 0:
            triggers.add(trigger)
            if seqs is None:
                seqs = _seqs(run.tlps)
            t = seqs.get(trigger)
            if t is not None:
                watched.add(t.region)
        e = p.epoch
        for c in p.consumes:
            key = (e, c.region)
            lst = ranges.get(key)
            if lst is None:
                lst = ranges[key] = []
            off, ln = c.offset, c.length
            lst.append((off, off + (ln if ln > 1 else 1)))
    return Reads(ranges, triggers, watched)


def _part(lo: int, hi: int, a: int, b: int) -> str:
    """Which part of [a, b) the bytes [lo, hi) hold."""
    head, tail = lo <= a < hi, lo < b <= hi
    return "whole" if head and tail else "head" if head else "tail" if tail else "mid"


#: (action, TLP type, RO) -> the TLP's name in its role ("data/POSTED/RO"): a handful of names, made once each
_NAMES: dict[tuple[Any, Any, Any], str] = {}


def _name(t: Any) -> str:
    attrs = t.attrs
    key = (t.action, attrs.type, attrs.ro)
    name = _NAMES.get(key)
    if name is None:
        name = _NAMES[key] = f"{_ACTION.get(t.action, '?')}/{attrs.type.name}{'/RO' if attrs.ro else ''}"
    return name


def role(t: Any, reads: Reads, token_bytes: int) -> str:
    """A TLP's role in the receiver's terms (see the module docstring)."""
    name = _name(t)
    if t.local:
        return "local"
    if t.seq in reads.triggers:
        return f"trigger/{name}"
    lo = t.off
    ln = t.length
    hi = lo + (ln if ln > 1 else 1)
    for a, b in reads.ranges.get((t.epoch, t.region), ()):
        if lo < b and a < hi:
            slot = ""
            if token_bytes and b - a > token_bytes:
                s = (lo - a) // token_bytes * token_bytes + a
                slot = "/slot-" + _part(lo, hi, s, s + token_bytes)
            return f"read-{_part(lo, hi, a, b)}{slot}/{name}"
    if t.region in reads.watched:
        return f"watched/{name}"
    return name


def _overlap(a: Any, b: Any) -> bool:
    """The two TLPs touch the same bytes: which one's value stays is decided by the reordering
    (a reset store passed by a signal, a flag passed by the word it guards)."""
    return a.region == b.region and a.off < b.off + max(b.length, 1) and b.off < a.off + max(a.length, 1)


def reorder_pairs(run: SimRun, reads: Reads | None = None) -> set[Feature]:
    out: set[Feature] = set()
    tinv = run.tlp_inversions
    if tinv:     # the roles need what the receiver read: a run without TLP inversions needs nothing of it
        r = reads or reads_of(run)
        tb = run.layout.token_bytes
        out = {("ro", role(a, r, tb), role(b, r, tb), rule, a.region, b.region, _overlap(a, b))
               for a, b, rule in tinv}
    pinv = run.packet_inversions
    if pinv:
        out |= {("pk", int(a.kind), int(b.kind), rule, a.region, b.region) for a, b, rule in pinv}
    return out


#: id(work requests) -> (them, the layout, their features): a run's shape is its built form's (the lists every
#: run over the form shares, never changed once built), so it is read once per form, least recently used out
_SHAPES: OrderedDict[int, tuple[list[Any], Any, frozenset[Feature]]] = OrderedDict()
SHAPES = 64


def shape_features(run: SimRun) -> set[Feature]:
    """Configuration waypoints: work-request kinds per QP relation, empty channels, epochs."""
    wrs, lay = run.wrs, run.layout
    key = id(wrs)
    hit = _SHAPES.get(key)
    if hit is not None and hit[0] is wrs and hit[1] is lay:
        _SHAPES.move_to_end(key)
        return set(hit[2])
    got = _shape(run)
    _SHAPES[key] = (wrs, lay, frozenset(got))
    if len(_SHAPES) > SHAPES:
        _SHAPES.popitem(last=False)
    return got


def _shape(run: SimRun) -> set[Feature]:
    data_qps: dict[int, set[int]] = {}
    for w in run.wrs:
        if getattr(w.op, "region", None) == ops.DATA:
            data_qps.setdefault(w.channel, set()).add(w.qp)
    out: set[Feature] = {("wr", type(w.op).__name__, getattr(w.op, "region", "-"),
                          "data-qp" if w.qp in data_qps.get(w.channel, ()) else "other-qp") for w in run.wrs}
    epochs = min(max((w.epoch for w in run.wrs), default=0), 3)
    out.add(("epochs", epochs))
    if 0 in run.layout.tokens_in_channel:
        out.add(("empty-channel", epochs))
    return out


class LineCoverage:
    """Line coverage of one execution, as one more feedback (off by default: sys.settrace costs
    several times the run). The executor calls `around(fn)` to run the execution traced."""

    name = "lines"
    doc = "line coverage of the execution (sys.settrace): libFuzzer's kind of feedback, in-process"

    def __init__(self) -> None:
        self.last: set[Feature] = set()

    def around(self, fn: Callable[[], SimRun]) -> SimRun:
        hit: set[Feature] = set()

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                hit.add(("line", frame.f_code.co_filename, frame.f_lineno))
            return tracer

        old = sys.gettrace()
        sys.settrace(tracer)
        try:
            return fn()
        finally:
            sys.settrace(old)
            self.last = hit

    def fn(self, run: SimRun) -> set[Feature]:
        return self.last


def _reorder(run: SimRun) -> set[Feature]:
    return reorder_pairs(run)


DEFAULT: tuple[Feedback, ...] = (
    Feedback("reorder", _reorder, "inversions by the roles of the two TLPs (what the receiver read or watched)"),
    Feedback("reads", accept_features, "slack per phase and part of a read range, reads-from, progress"),
    Feedback("shape", shape_features, "work-request kinds per QP, empty channels, epochs"),
)
BUILTIN: dict[str, Callable[[], Any]] = {"lines": LineCoverage}


def features(run: SimRun, feedbacks: Sequence[Any] = DEFAULT) -> set[Feature]:
    out: set[Feature] = set()
    for f in feedbacks:
        out |= f.fn(run)
    return out


def load(specs: Iterable[str]) -> list[Any]:
    """The feedbacks named on the command line: a built-in name (`lines`) or module:attr (a Feedback,
    or a list/tuple of them; a plug-in, imported only because it was named)."""
    from epfuzz.search.plugins import load_object

    out: list[Any] = []
    for spec in specs:
        if spec in BUILTIN:
            out.append(BUILTIN[spec]())
            continue
        obj = load_object(spec, "--feedback")
        items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
        for it in items:
            if not (isinstance(getattr(it, "name", None), str) and callable(getattr(it, "fn", None))):
                from epfuzz.infra.errors import InputError

                raise InputError(f"--feedback {spec}: {it!r} is no feedback (it needs a `name` and a `fn(run)`)")
            out.append(it)
    return out


def feature_index(key: Feature) -> int:
    return zlib.crc32(repr(key).encode()) % POOL


class Counters:
    """A block of atheris counters; `emit` bumps one per feature key (reserve before Setup).

    atheris has no public custom-counter API; `_reserve_counter` and `_trace_branch` are what its
    own instrumentation calls, so libFuzzer reads these as it reads edge counters."""

    def __init__(self, size: int = POOL) -> None:
        import atheris

        self.size = size
        self.base = [atheris._reserve_counter() for _ in range(size)]
        self._atheris = atheris
        self.feedbacks: Sequence[Any] = DEFAULT

    def features(self, run: SimRun) -> set[Feature]:
        return features(run, self.feedbacks)

    def emit(self, keys: Iterable[Feature]) -> None:
        # looked up per call: atheris.Setup rebinds _trace_branch to the libFuzzer-linked core
        base, trace = self.base, self._atheris._trace_branch
        for k in keys:
            trace(base[feature_index(k) % self.size])
