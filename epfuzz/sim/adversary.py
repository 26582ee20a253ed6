"""The adversary: moves packets or TLPs earlier, exactly as far as the rules allow.

A schedule is a list of overtakes (position, distance). Each moves one element
earlier past up to `distance` neighbours, stopping at the first it may not pass.
Only moving the *later-arrived* element earlier creates an inversion, and every
inversion is checked when it is created, so the final order always satisfies the
pairwise rule table; conversely every order that does can be reached with at most
one overtake per element (place the elements in target order, left to right).
So this encoding is complete for the rule table, and the default (empty) schedule
is arrival order: the minimizer's "fewer deviations" means fewer overtakes.

What may pass what is a `PassRule`; the emulator's two are in `epfuzz.sim.pass_rules`
(TLPs at the root complex, packets on the network).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from epfuzz.core.native import mypyc_attr
from epfuzz.sim.netmoves import SeqIndex
from epfuzz.sim.packets import Packet, Tlp
from epfuzz.sim.spans import bisect_right

T = TypeVar("T", Packet, Tlp)
#: (later, earlier) -> the rule clause that permits the pass, or None
PassRule = Callable[[Any, Any], "str | None"]
#: a `PassRule` over TLPs, typed so that compiled callers pass them without a check
TlpRule = Callable[[Tlp, Tlp], "str | None"]


@mypyc_attr(acyclic=True)  # untracked by the cycle collector: see `packets.Packet`
class QpStreams:
    """The reorder window of the root complex, counted in the passer's QP stream (`Knobs.reorder_window`).

    A QP's stream is its own TLPs plus the receiver's local stores (which precede an
    epoch's traffic). The window bounds how many units of that stream a TLP may pass;
    the interleaving of different QPs' TLPs is responder and network timing, which IB
    does not order ("xQP"), so passing another QP's TLP spends none of it. A local
    store that moves counts every unit it passes. `epfuzz.sim.explore` counts the same way.
    """

    def __init__(self, items: Sequence[Tlp], window: int) -> None:
        self.window = window
        #: the TLPs by seq (a run's TLP list is never changed afterwards: the adversary splits copies)
        self.items: Sequence[Tlp] = items if _by_seq(items) else sorted(items, key=_seq)
        #: per QP, made on first use (`stream`): the run starts (seq), their unit counts, and the stream's
        #: units before each run. Only the QPs of TLPs that move past their own QP's are ever asked for,
        #: so a schedule of a few moves builds a stream or two, not every QP's (issue 31: building them
        #: all was a quarter of the adversary's share of a fresh scenario)
        self.made: dict[int, tuple[list[int], list[int], list[int]]] = {}
        #: the QP asked for last and its stream: a move's passes mostly ask for one QP's stream, and the dict
        #: look-up boxed the QP and hashed it each time (issue 31). Streams never change once made
        self.last_qp = -1
        self.last: tuple[list[int], list[int], list[int]] = ([], [], [])

    def stream(self, qp: int) -> tuple[list[int], list[int], list[int]]:
        """`qp`'s stream: its own TLPs and every receiver-local store, in seq order."""
        if qp == self.last_qp:
            return self.last
        s = self.made.get(qp)
        if s is None:
            starts: list[int] = []
            lens: list[int] = []
            before: list[int] = []
            count = 0
            for t in self.items:
                if t.local or t.qp == qp:
                    starts.append(t.seq)
                    lens.append(t.n)
                    before.append(count)
                    count += t.n
            s = self.made[qp] = (starts, lens, before)
        self.last_qp, self.last = qp, s
        return s

    def position(self, qp: int, seq: int) -> int:
        """Units of `qp`'s stream with a seq up to and including `seq`."""
        starts, lens, before = self.stream(qp)
        return _position(starts, lens, before, seq)

    def reach(self, item: Tlp, prev: Tlp, rule: str) -> int:
        """How many units of `prev`, counted from its tail, `item` may pass (the passer is one unit)."""
        if rule == "xQP":
            return prev.n
        if item.local:
            return prev.seq + prev.n - (item.seq - self.window)
        q = item.qp
        starts, lens, before = self.stream(q)  # once for both positions
        here = _position(starts, lens, before, item.seq)
        if prev.local or prev.qp == q:  # prev's units are consecutive in the stream
            return _position(starts, lens, before, prev.seq) + prev.n - here + self.window
        return prev.n if here - _position(starts, lens, before, prev.seq) <= self.window else 0


def _position(starts: list[int], lens: list[int], before: list[int], seq: int) -> int:
    """`QpStreams.position` over a stream already looked up."""
    j = bisect_right(starts, seq) - 1
    if j < 0:
        return 0
    return before[j] + min(seq - starts[j] + 1, lens[j])


def _seq(t: Tlp) -> int:
    return t.seq


def _by_seq(items: Sequence[Tlp]) -> bool:
    """Whether `items` ascend by seq already (a responder's output does): then no sort, and no key call per TLP."""
    last = -1  # seqs are >= 0 (a negative one only costs the sort)
    for t in items:
        if t.seq <= last:
            return False
        last = t.seq
    return True


def apply_overtakes(items: Sequence[T], moves: Sequence[tuple[int, int]], can_pass: PassRule,
                    window: int, streams: QpStreams | None = None) -> tuple[list[T], list[tuple[T, T, str]]]:
    """Return the new order and the inversions created, as (later, earlier, rule).

    Elements are runs of `n` units (packets: always 1). `index` picks a unit; its
    run is split so that unit moves alone; a run it passes is split when only its
    tail may be passed (distance or window). Pass rules are per attributes, so
    they hold for every unit of a run alike. `window` counts every unit passed
    (packets); with `streams` (TLPs) the window is counted as `QpStreams` says.
    """
    order: list[Any] = list(items)  # Any: packets and TLP runs alike (mypyc compiles one body for both)
    inversions: list[tuple[T, T, str]] = []
    total = sum(x.n for x in order)
    if total < 2:
        return order, inversions
    for index, distance in moves:
        u = index % total
        pos, acc = 0, 0
        while acc + order[pos].n <= u:
            acc += order[pos].n
            pos += 1
        run = order[pos]
        k = u - acc
        if run.n > 1:  # isolate the chosen unit
            if k:  # in place, not a slice assignment: no slice object or parts list per split (issue 31)
                head, run = run.split(k)
                order[pos] = head
                pos += 1
                order.insert(pos, run)
            if run.n > 1:
                run, rest = run.split(1)
                order[pos] = run
                order.insert(pos + 1, rest)
        item = order[pos]
        remaining = distance
        while remaining > 0 and pos > 0:
            prev = order[pos - 1]
            if prev.seq > item.seq:
                rule = "restore"
                m = min(prev.n, remaining)
            else:
                r = can_pass(item, prev)
                if r is None:
                    break
                rule = r
                if streams is None:
                    m = min(min(prev.n, remaining), prev.seq + prev.n - (item.seq - window))  # oldest: seq - window
                else:
                    m = min(min(prev.n, remaining), streams.reach(item, prev, r))  # two-argument min: compiled inline
                if m <= 0:
                    break
            if m < prev.n:
                head, prev = prev.split(prev.n - m)
                order[pos - 1] = head
                order.insert(pos, prev)
                pos += 1
            if rule != "restore":
                inversions.append((item, prev, rule))
            order[pos - 1], order[pos] = item, prev
            pos -= 1
            remaining -= m
    return order, surviving(order, inversions)


def surviving(order: Sequence[T], inversions: Sequence[tuple[T, T, str]]) -> list[tuple[T, T, str]]:
    """Each recorded pass, on the pieces of the passed run still behind the passer in `order`.

    A later move may split a run an earlier one passed: the run object is then gone
    but its units are not, so pieces are matched by unit seq. Matching by identity
    dropped such passes, and with them the culprit of the finding (issue 18.4). A
    pass that a later move undid leaves no piece behind the passer and is dropped.
    The passer itself is always a single unit (isolated before it moves), never split.
    """
    if not inversions:
        return []
    # every unit is in exactly one piece of `order`, each piece named by its first unit's seq, and a passed
    # run is a union of pieces (a split only ever refines them), so its pieces are found by walking seqs up
    # from its first (tests/sim/test_adversary_tlp.py holds this to the search by sorted seqs it replaced)
    at = SeqIndex([x.seq for x in order])
    width = len(order)
    out: list[tuple[T, T, str]] = []
    seen: set[int] = set()  # (passer, piece) as passer * width + piece
    for a, b, r in inversions:
        ra = at.at(a.seq)  # the passer is one unit, never split: the piece of its seq is itself
        s, end = b.seq, b.seq + b.n
        while s < end:
            i = at.at(s)
            x = order[i]
            if ra < i and ra * width + i not in seen:
                seen.add(ra * width + i)
                out.append((a, x, r))
            s += x.n
    return out


def apply_tlp_overtakes(items: Sequence[Tlp], moves: Sequence[tuple[int, int]], can_pass: TlpRule, window: int,
                        streams: QpStreams | None = None) -> tuple[list[Tlp], list[tuple[Tlp, Tlp, str]]]:
    """`apply_overtakes` for TLP runs, line for line, with every element typed `Tlp`.

    mypyc reads a native class's attributes straight from the object only where it knows the class:
    over untyped elements each `.seq`/`.n` is a generic attribute lookup, most of what a schedule-only
    execution spent in the adversary (issue 31). The generic body stays for packets and other
    callers; tests/sim/test_adversary_tlp.py holds the two to the same orders and inversions."""
    order: list[Tlp] = list(items)
    inversions: list[tuple[Tlp, Tlp, str]] = []
    total = sum(x.n for x in order)
    if total < 2:
        return order, inversions
    for index, distance in moves:
        u = index % total
        pos, acc = 0, 0
        while acc + order[pos].n <= u:
            acc += order[pos].n
            pos += 1
        run = order[pos]
        k = u - acc
        if run.n > 1:  # isolate the chosen unit
            if k:  # in place, not a slice assignment: no slice object or parts list per split (issue 31)
                head, run = run.split(k)
                order[pos] = head
                pos += 1
                order.insert(pos, run)
            if run.n > 1:
                run, rest = run.split(1)
                order[pos] = run
                order.insert(pos + 1, rest)
        item = order[pos]
        remaining = distance
        while remaining > 0 and pos > 0:
            prev = order[pos - 1]
            if prev.seq > item.seq:
                rule = "restore"
                m = min(prev.n, remaining)
            else:
                r = can_pass(item, prev)
                if r is None:
                    break
                rule = r
                if streams is None:
                    m = min(min(prev.n, remaining), prev.seq + prev.n - (item.seq - window))  # oldest: seq - window
                else:
                    m = min(min(prev.n, remaining), streams.reach(item, prev, r))  # two-argument min: compiled inline
                if m <= 0:
                    break
            if m < prev.n:
                head, prev = prev.split(prev.n - m)
                order[pos - 1] = head
                order.insert(pos, prev)
                pos += 1
            if rule != "restore":
                inversions.append((item, prev, rule))
            order[pos - 1], order[pos] = item, prev
            pos -= 1
            remaining -= m
    return order, surviving_tlps(order, inversions)


def surviving_tlps(order: list[Tlp],
                   inversions: list[tuple[Tlp, Tlp, str]]) -> list[tuple[Tlp, Tlp, str]]:
    """`surviving` over typed TLP runs (see `apply_tlp_overtakes`), taking lists: over a Sequence each
    index and each loop went through the generic item and iterator protocol (issue 31)."""
    if not inversions:
        return []
    # every unit is in exactly one piece of `order`, each piece named by its first unit's seq, and a passed
    # run is a union of pieces (a split only ever refines them), so its pieces are found by walking seqs up
    # from its first (tests/sim/test_adversary_tlp.py holds this to the search by sorted seqs it replaced)
    at = SeqIndex([x.seq for x in order])
    width = len(order)
    out: list[tuple[Tlp, Tlp, str]] = []
    seen: set[int] = set()  # (passer, piece) as passer * width + piece
    for a, b, r in inversions:
        ra = at.at(a.seq)  # the passer is one unit, never split: the piece of its seq is itself
        s, end = b.seq, b.seq + b.n
        while s < end:
            i = at.at(s)
            x = order[i]
            if ra < i and ra * width + i not in seen:
                seen.add(ra * width + i)
                out.append((a, x, r))
            s += x.n
    return out
