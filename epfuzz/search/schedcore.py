"""The scheduler's sum trees and energy (epfuzz.search.scheduler re-exports them), compiled with the emulator.

An entry is re-weighed several times per execution (its own pick, what changed, `REFRESH` round-robin), each a
sum over its features and three tree updates. Compiled (epfuzz.core.native.COMPILED), they make the same
floating-point operations in the same order on C doubles: the same IEEE results, so the same picks as the
plain-Python path (EPFUZZ_PURE=1); tests/search/test_trajectory.py holds the engine to that.
"""

from __future__ import annotations

import math
from typing import Any


class SumTree:
    """Weights over 0..n-1 with O(log n) update and weighted draw (a Fenwick tree)."""

    def __init__(self) -> None:
        self.n = 0
        self.cap = 1
        self.tree: list[float] = [0.0] * 2
        self.w: list[float] = []

    def _grow(self) -> None:
        self.cap *= 2
        w = self.w
        cap = self.cap
        tree = self.tree = [0.0] * (cap + 1)
        nw = len(w)
        for j in range(1, cap + 1):      # O(cap) once per doubling: amortized O(1) per append
            if j <= nw:
                tree[j] += w[j - 1]
            k = j + (j & -j)
            if k <= cap:
                tree[k] += tree[j]

    def append(self, x: float) -> None:
        self.w.append(0.0)
        self.n += 1
        if self.n > self.cap:
            self._grow()
        self.set(self.n - 1, x)

    def set(self, i: int, x: float) -> None:
        w = self.w
        d = x - w[i]
        if d == 0:
            return
        w[i] = x
        tree = self.tree
        cap = self.cap
        j = i + 1
        while j <= cap:
            tree[j] += d
            j += j & -j

    def total(self) -> float:
        tree = self.tree
        s, j = 0.0, self.cap
        while j > 0:
            s += tree[j]
            j -= j & -j
        return s

    def draw(self, rng: Any) -> int | None:
        tot = self.total()
        if tot <= 1e-12:
            return None
        r: float = rng.random() * tot
        tree = self.tree
        cap = self.cap
        pos, step = 0, cap
        while step:
            nxt = pos + step
            if nxt <= cap and tree[nxt] <= r:
                r -= tree[nxt]
                pos = nxt
            step >>= 1
        return min(pos, self.n - 1)


def energy_of(hits: list[int], feats: Any, picked: int, slots: int, near: bool, units: int) -> float:
    """Rarity (the sum of 1/hits of the features, added in their order: what `sum` of those quotients does
    from 0 in CPython 3.11, a plain double accumulation), damped by picks, times 4 for a slot holder and 8
    for a near miss, over the cost in TLPs (epfuzz.search.scheduler.energy)."""
    s = 0.0
    for k in feats:  # ids (an `array`): each unboxed once, so `hits[i]` is a native list read, not a generic one
        i: int = k
        s += 1.0 / hits[i]
    w = s / math.sqrt(1 + picked)
    if slots:
        w *= 4.0
    if near:
        w *= 8.0
    return w / (1 + units / 500)


def reweigh(near: SumTree, fav: SumTree, every: SumTree, i: int, e: Any, hits: list[int]) -> None:
    """Entry `i` (`e`) re-weighed in the three pools (`Scheduler._set`)."""
    w = energy_of(hits, e.feats, e.picked, e.slots, e.near, e.units)
    while every.n <= i:
        near.append(0.0)
        fav.append(0.0)
        every.append(0.0)
    every.set(i, w)
    fav.set(i, w if e.held > 0 else 0.0)
    near.set(i, w if e.near else 0.0)


def position(order: Any, unit: int) -> int:
    """Index of arrival unit `unit` in `order` (TLP runs or packets, each `n` units from `seq`), counted in
    units; 0 where no element holds it (`epfuzz.search.sampler`'s change points: a walk over the whole order
    per change point, hundreds of elements on the deep set, compiled here)."""
    acc = 0
    for x in order:
        seq: int = x.seq
        n: int = x.n
        if seq <= unit < seq + n:
            return acc + unit - seq
        acc += n
    return 0
