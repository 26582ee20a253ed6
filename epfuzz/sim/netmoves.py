"""The adversary's net moves over packets (`apply_packet_overtakes`), and the index by unit seq (`SeqIndex`) that
it and `epfuzz.sim.adversary.surviving` find an element's position in the final order with.

Split from `epfuzz.sim.adversary` (which re-exports `apply_packet_overtakes`), whose generic and TLP bodies
stay twins there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from epfuzz.core.native import mypyc_attr
from epfuzz.sim.packets import Packet

#: spans of seqs up to this many times the elements (plus a constant) are indexed by a list, wider ones by a dict
_DENSE: int = 4


@mypyc_attr(acyclic=True)  # untracked by the cycle collector: see `packets.Packet`
class SeqIndex:
    """Position in an order of the element whose seq is `seq` (`at`), for seqs every element has its own of.

    A run's elements are the emulator's packets (seq 0..n-1) or TLP runs (each named by its first unit, the
    units 0..total-1), so the seqs are dense: a list by seq - lowest, where a dict of every element (a boxed
    key hashed per element) was most of what the surviving passes cost (issue 31). Seqs spread wider than
    `_DENSE` times the elements (no caller makes them) take the dict."""

    def __init__(self, seqs: list[int]) -> None:
        lo, hi = (seqs[0], seqs[0]) if seqs else (0, -1)
        for s in seqs:  # a typed loop: the builtins min and max compared boxed ints through the generic protocol
            if s < lo:
                lo = s
            elif s > hi:
                hi = s
        self.lo = lo
        self.pos: list[int] = []
        self.by: dict[int, int] | None = None
        if hi - lo < _DENSE * len(seqs) + 64:
            pos = self.pos = [-1] * (hi - lo + 1)
            for i in range(len(seqs)):
                pos[seqs[i] - lo] = i
        else:
            self.by = {s: i for i, s in enumerate(seqs)}

    def at(self, seq: int) -> int:
        """The position of the element of seq `seq`; KeyError if none has it (as the dict raised)."""
        by = self.by
        if by is not None:
            return by[seq]
        i = seq - self.lo
        pos = self.pos
        if 0 <= i < len(pos) and pos[i] >= 0:
            return pos[i]
        raise KeyError(seq)


def apply_packet_overtakes(items: Sequence[Packet], moves: Sequence[tuple[int, int]],
                           can_pass: Callable[[Any, Any], str | None],
                           window: int) -> tuple[list[Packet], list[tuple[Packet, Packet, str]]]:
    """`apply_overtakes` for packets, typed: a packet is one unit, so no run is ever isolated or split, a
    move's unit is its position, and every step passes exactly one packet. The generic body read each
    packet's fields by generic attribute look-up (issue 31: three quarters of a fresh scenario's net moves);
    tests/sim/test_adversary_tlp.py holds the two to the same orders and inversions.

    The passes are kept in three lists, not a tuple each (a tuple is made only for a pass that survives), and
    `surviving`'s check against recording one pass twice is made only where it can happen: one move passes
    each packet at most once, so only a packet that passes in two moves can pass one packet twice."""
    order: list[Packet] = list(items)
    total = len(order)
    if total < 2:
        return order, []
    passers: list[Packet] = []
    passed: list[Packet] = []
    rules: list[str] = []
    movers: list[int] = []  # per move that passed something, its packet's seq
    for index, distance in moves:
        pos = index % total
        item = order[pos]
        remaining = distance
        first = len(passers)
        while remaining > 0 and pos > 0:
            prev = order[pos - 1]
            if prev.seq <= item.seq:
                r = can_pass(item, prev)
                if r is None or prev.seq + 1 - (item.seq - window) <= 0:  # the window: oldest passable is seq - window
                    break
                passers.append(item)
                passed.append(prev)
                rules.append(r)
            # else: "restore", a pass of a later-sent packet, not recorded
            order[pos - 1], order[pos] = item, prev
            pos -= 1
            remaining -= 1
        if len(passers) > first:
            movers.append(item.seq)
    out: list[tuple[Packet, Packet, str]] = []
    if not passers:
        return order, out
    at = SeqIndex([x.seq for x in order])  # `surviving`: a packet is never split, its piece is itself
    width = len(order)
    seen: set[int] | None = set() if len(set(movers)) < len(movers) else None
    for k in range(len(passers)):
        a, b = passers[k], passed[k]
        ra, i = at.at(a.seq), at.at(b.seq)
        if ra < i:
            if seen is not None:
                if ra * width + i in seen:
                    continue
                seen.add(ra * width + i)
            out.append((a, b, rules[k]))
    return order, out
