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

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from epfuzz.sim.packets import Packet, Tlp

T = TypeVar("T", Packet, Tlp)
#: (later, earlier) -> the rule clause that permits the pass, or None
PassRule = Callable[[Any, Any], "str | None"]


def apply_overtakes(items: Sequence[T], moves: Sequence[tuple[int, int]], can_pass: PassRule,
                    window: int) -> tuple[list[T], list[tuple[T, T, str]]]:
    """Return the new order and the inversions created, as (later, earlier, rule).

    Elements are runs of `n` units (packets: always 1). `index` picks a unit; its
    run is split so that unit moves alone; a run it passes is split when only its
    tail may be passed (distance or window). Pass rules are per attributes, so
    they hold for every unit of a run alike.
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
            parts: list[Any] = []
            if k:
                head, run = run.split(k)
                parts.append(head)
            if run.n > 1:
                run, rest = run.split(1)
                parts += [run, rest]
            else:
                parts.append(run)
            order[pos:pos + 1] = parts
            pos += 1 if k else 0
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
                lowest = item.seq - window          # the oldest unit it may pass
                m = min(prev.n, remaining, prev.seq + prev.n - lowest)
                if m <= 0:
                    break
            if m < prev.n:
                head, prev = prev.split(prev.n - m)
                order[pos - 1:pos] = [head, prev]
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
    rank = {id(x): i for i, x in enumerate(order)}
    starts = sorted((x.seq, i) for i, x in enumerate(order))
    keys = [s for s, _ in starts]
    out: list[tuple[T, T, str]] = []
    seen: set[tuple[int, int]] = set()
    for a, b, r in inversions:
        ra = rank[id(a)]
        j = bisect_left(keys, b.seq)
        while j < len(keys) and keys[j] < b.seq + b.n:
            i = starts[j][1]
            if ra < i and (ra, i) not in seen:
                seen.add((ra, i))
                out.append((a, order[i], r))
            j += 1
    return out
