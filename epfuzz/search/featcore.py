"""The loops of the `reorder` and `reads` feedbacks (epfuzz.search.feedbacks): what the receiver read and
watched, the roles of TLPs in its terms, the inversions by role; slack per phase and part of a read range,
progress steps, reads-from.

They run at every execution of the guided engine over every TLP run and poll of it, so they are compiled with
the emulator (epfuzz.core.native.COMPILED: mypyc reads a TLP's fields from the object, where the interpreter made
a generic attribute lookup of each) and stay plain Python where the emulator is (EPFUZZ_PURE=1, no build): the
same code either way, so the same features. tests/search/test_feedback.py holds them to the loops as first
written.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from epfuzz.ir import ops
from epfuzz.sim.packets import Tlp, TlpAction, Wr
from epfuzz.sim.run import SimRun

Feature = tuple[Any, ...]
_ACTION = {TlpAction.COPY: "data", TlpAction.VALUE: "value", TlpAction.ADD: "add", TlpAction.READ: "read",
           TlpAction.CQE: "cqe", TlpAction.FETCH: "fetch", TlpAction.STALE: "stale"}


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
_SEQS: OrderedDict[int, tuple[list[Tlp], dict[int, Tlp]]] = OrderedDict()
SEQS = 64


def _seqs(tlps: list[Tlp]) -> dict[int, Tlp]:
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
    seqs: dict[int, Tlp] | None = None
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


def marked_tlps(run: SimRun) -> list[Tlp]:
    """The TLP runs the receiver hinges on (`epfuzz.search.sampler._marked`, which says why) for a run with
    polls: those that woke an accepting poll or landed in a region they did, and the data runs holding the
    first or last bytes of an accepted range or of a slot in one. A loop over every TLP run of a base run,
    once per configuration the guided engine mutates, compiled here."""
    r = reads_of(run)
    triggers, watched, ranges = r.triggers, r.watched, r.ranges
    tb = run.layout.token_bytes
    out: list[Tlp] = []
    for t in run.tlps:
        if t.local:
            continue
        if t.seq in triggers or t.region in watched:
            out.append(t)
            continue
        lo = t.off
        ln = t.length
        hi = lo + (ln if ln > 1 else 1)
        for a, b in ranges.get((t.epoch, t.region), ()):
            if lo < b and a < hi and (lo <= a or hi >= b or (tb != 0 and ((lo - a) % tb == 0 or (hi - a) % tb == 0))):
                out.append(t)
                break
    return out


def _part(lo: int, hi: int, a: int, b: int) -> str:
    """Which part of [a, b) the bytes [lo, hi) hold."""
    head, tail = lo <= a < hi, lo < b <= hi
    return "whole" if head and tail else "head" if head else "tail" if tail else "mid"


#: (action, TLP type, RO) -> the TLP's name in its role ("data/POSTED/RO"): a handful of names, made once each
_NAMES: dict[tuple[Any, Any, Any], str] = {}


def _name(t: Tlp) -> str:
    attrs = t.attrs
    key = (t.action, attrs.type, attrs.ro)
    name = _NAMES.get(key)
    if name is None:
        name = _NAMES[key] = f"{_ACTION.get(t.action, '?')}/{attrs.type.name}{'/RO' if attrs.ro else ''}"
    return name


def role(t: Tlp, reads: Reads, token_bytes: int) -> str:
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


def _overlap(a: Tlp, b: Tlp) -> bool:
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


def _bucket(x: int) -> int:
    """Signed log2 bucket: 0 for 0, +-bit_length otherwise."""
    return x.bit_length() if x >= 0 else -(-x).bit_length()


def _landings(run: SimRun) -> dict[tuple[int, str], list[tuple[int, int, int]]]:
    """(epoch, region) -> (start, end, position after it became visible) of every TLP run."""
    out: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
    pos = 0
    for t in run.order:
        pos += t.n
        key = (t.epoch, t.region)
        lst = out.get(key)
        if lst is None:
            lst = out[key] = []
        off = t.off
        ln = t.length
        lst.append((off, off + (ln if ln > 1 else 1), pos))
    return out


def _progress(k: int, n: int) -> int:
    return 0 if k == 0 else (2 if k >= n else 1)


def accept_features(run: SimRun) -> set[Feature]:
    """Slack per (phase, part of the read range), reads-from, progress transitions.

    Written as plain loops over locals (a run's features are computed at every execution): a part's last
    landing is the last overlapping run in visibility order (positions only grow along a region's list),
    and an epoch's progress moves one channel at a time."""
    out: set[Feature] = set()
    polls = run.polls
    if polls:
        lay = run.layout
        tb = lay.token_bytes or 16
        tokens = lay.tokens_in_channel
        spc = lay.slots_per_channel
        nch = lay.num_channels
        data = ops.DATA
        land = _landings(run)
        best: dict[tuple[Any, ...], int] = {}
        done: dict[tuple[int, int], int] = {}
        prog: dict[int, list[int]] = {}     # epoch -> its channels' progress (`_progress`), as `done` says now
        for p in polls:
            e = p.epoch
            e3 = e if e < 3 else 3
            state = prog.get(e)
            if state is None:
                state = prog[e] = [_progress(0, tokens[c]) for c in range(nch)]
            before = tuple(state)
            moved = False
            position = p.position
            for c in p.consumes:
                region, a, ln, ch = c.region, c.offset, c.length, c.channel
                b = a + (ln if ln > 1 else 1)
                last: dict[str, int] = {}
                for lo, hi, pos in land.get((e, region)) or ():
                    if lo < b and a < hi:
                        if lo <= a:
                            last["head"] = pos
                            if b <= hi:
                                last["tail"] = pos
                        elif b <= hi:
                            last["tail"] = pos
                        else:
                            last["mid"] = pos
                final = region == data and (a + ln) // tb - ch * spc >= tokens[ch]
                phase: tuple[Any, ...] = (e3, "final" if final else "batch", region)
                for q, pos in last.items():
                    slack = position - pos          # < 0: this part landed only after the accept
                    bk: tuple[Any, ...] = phase + (q,)
                    best[bk] = min(best.get(bk, slack), slack)
                if region == data:
                    k = done[(e, ch)] = done.get((e, ch), 0) + ln // tb
                    if 0 <= ch < nch:
                        state[ch] = _progress(k, tokens[ch])
                    moved = True
            if moved:
                after = tuple(state)
                if after != before:
                    count = (after.count(0), after.count(1), after.count(2))
                    for ch in range(nch):
                        b, a = before[ch], after[ch]
                        if b != a:      # one channel's step, with what the other channels hold (not 3^C tuples)
                            others = tuple(x for x in (0, 1, 2) if count[x] > (x == a))
                            out.add(("st", e3, b, a, others))
        for bk, slack in best.items():
            out.add(("slack",) + bk + (_bucket(slack),))
    v = run.violation
    if v is not None and v.kind != "hang":
        classes = {cls for _, cls in v.bad_chunks}
        mix = "mix" if v.bad_bytes < v.length or len(classes) > 1 else next(iter(classes), "?")
        out.add(("rf", v.region, mix))
    elif polls:
        out.add(("rf", "fresh"))
    return out


# ------------------------------------------------------------------ per execution: its cost, its features counted
def units_of(order: Any) -> int:
    """TLPs in a run (`Execution.units`): the sum of its visibility order's run lengths (a `Tlp`'s `n` a native
    read, where a generic attribute look-up and add cost ~150 instructions a run, issue 31)."""
    n = 0
    for t in order:
        if isinstance(t, Tlp):
            n += t.n
        else:  # a stand-in's (a test's run)
            n += t.n
    return n


def count_features(feats: Any, ids: dict[Feature, int], hits: list[int], tops: list[int],
                   entries: list[Any], units: int) -> tuple[list[int], list[Feature], bool]:
    """`Corpus.observe`'s first pass, in the set's order: each known feature's hit counted, the new ones listed,
    and whether the run costs under half of some known feature's cheapest holder (tested until one does)."""
    known: list[int] = []
    fresh: list[Feature] = []
    cheaper = False
    for k in feats:
        i = ids.get(k)
        if i is None:
            fresh.append(k)
            continue
        hits[i] += 1
        known.append(i)
        if not cheaper:
            cheaper = units * 2 < entries[tops[i]].units
    return known, fresh, cheaper


def shape_of(wrs: list[Wr], tokens_in_channel: Any) -> set[Feature]:
    """`feedbacks._shape`: work-request kinds per QP relation, empty channels, epochs (the same insertions in
    the same order, so the same set in the same iteration order)."""
    data = ops.DATA
    data_qps: dict[int, set[int]] = {}
    for w in wrs:  # each WR's op class and region read off its record (`OpRec.op_class`): no op made for them
        if w.rec.op_region() == data:
            data_qps.setdefault(w.channel, set()).add(w.qp)
    out: set[Feature] = set()
    none: set[int] = set()
    for w in wrs:
        rec = w.rec
        out.add(("wr", rec.op_class(), rec.op_region(),
                 "data-qp" if w.qp in data_qps.get(w.channel, none) else "other-qp"))
    top = 0
    first = True
    for w in wrs:
        ep: int = w.epoch
        if first or ep > top:
            top = ep
            first = False
    epochs = min(top, 3)
    out.add(("epochs", epochs))
    if 0 in tokens_in_channel:
        out.add(("empty-channel", epochs))
    return out
