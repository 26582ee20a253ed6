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

# the `reorder` and `reads` feedbacks' loops: compiled with the emulator (epfuzz.core.native.COMPILED), plain
# Python where it is not; the functions keep their names here
from epfuzz.search.featcore import (  # noqa: F401
    Reads,
    _bucket,
    _landings,
    _overlap,
    _part,
    _progress,
    accept_features,
    reads_of,
    reorder_pairs,
    role,
    shape_of,
)
from epfuzz.sim.engine import SimRun

POOL = 1 << 14          # libFuzzer counters reserved for semantic features
Feature = tuple[Any, ...]


@dataclass(frozen=True)
class Feedback:
    """One named feature function; `lines` feedbacks need the execution wrapped (see `LineCoverage`)."""

    name: str
    fn: Callable[[SimRun], set[Feature]]
    doc: str = ""


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
    # work-request kinds per QP relation (QPs that carry data in their channel or not), epochs (3 and more
    # alike), an empty channel: the loops in epfuzz.search.featcore (compiled)
    return shape_of(run.wrs, run.layout.tokens_in_channel)


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


#: features whose counter `Counters.emit` keeps (cleared when full): a run's features are mostly ones seen before,
#: and a key's `repr` cost ~5k instructions under callgrind, a dict look-up a few hundred (issue 31: ~8% of the
#: harness's execution). Keys equal as dict keys share a counter: the default features hold one type per position
#: (never 1 in one key where another holds True), and the corpus counts such keys as one feature anyway
INDEXED = 1 << 16


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
        self._index: dict[Feature, int] = {}   # key -> its counter's position in `base` (INDEXED at most)

    def features(self, run: SimRun) -> set[Feature]:
        return features(run, self.feedbacks)

    def emit(self, keys: Iterable[Feature]) -> None:
        # looked up per call: atheris.Setup rebinds _trace_branch to the libFuzzer-linked core
        base, trace, index = self.base, self._atheris._trace_branch, self._index
        for k in keys:
            i = index.get(k)
            if i is None:
                if len(index) >= INDEXED:
                    index.clear()
                i = index[k] = feature_index(k) % self.size
            trace(base[i])
