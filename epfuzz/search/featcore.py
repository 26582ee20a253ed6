"""The loops of the `reads` feedback (epfuzz.search.feedbacks.accept_features): slack per phase and part of a
read range, progress steps, reads-from.

They run at every execution of the guided engine over every TLP run and poll of it, so they are compiled with
the emulator (epfuzz.core.native.COMPILED: mypyc reads a TLP's fields from the object, where the interpreter made
a generic attribute lookup of each) and stay plain Python where the emulator is (EPFUZZ_PURE=1, no build): the
same code either way, so the same features. tests/search/test_feedback.py holds them to the loops as first
written.
"""

from __future__ import annotations

from typing import Any

from epfuzz.ir import ops
from epfuzz.sim.run import SimRun

Feature = tuple[Any, ...]


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
