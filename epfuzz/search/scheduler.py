"""Which kept input to mutate next: energy (AFL's word) over three pools, at bounded cost per pick.

Energy is rarity (Entropic's idea, AFLFast's rare edges: the sum of 1/hits of the entry's
features), damped by how often it was picked, times 4 for a slot holder (the smallest slack of
some phase: IJON), times 8 for a near miss, over its cost in TLPs. Picks come from the near misses
3 times in 10 (so a half-made race is not drowned by inputs new in some unrelated way), from the
favoured entries (cheapest holder of some feature) 5 in 10, else from all.

The old loop recomputed every energy every 32 executions and drew with `random.choices` over the
whole corpus: O(corpus) per execution, so a run slowed as its corpus grew (34 exec/s at 1,823
entries). Here each pool is a sum tree (a Fenwick tree: update and draw in O(log n)), an entry's
energy is recomputed when it is added, picked or changes standing, and `REFRESH` more entries
round-robin per execution keep the rarity terms fresh: per-execution cost O(REFRESH * features *
log n), whatever the corpus size.
"""

from __future__ import annotations

import math
import random
from itertools import repeat
from operator import truediv

from epfuzz.search.corpus import Corpus, Entry

REFRESH = 4     # entries re-weighed per execution, round-robin (their hit counts drift)


class SumTree:
    """Weights over 0..n-1 with O(log n) update and weighted draw (a Fenwick tree)."""

    def __init__(self) -> None:
        self.n = 0
        self.cap = 1
        self.tree = [0.0] * 2
        self.w: list[float] = []

    def _grow(self) -> None:
        self.cap *= 2
        w = self.w
        self.tree = [0.0] * (self.cap + 1)
        for j in range(1, self.cap + 1):      # O(cap) once per doubling: amortized O(1) per append
            if j <= len(w):
                self.tree[j] += w[j - 1]
            k = j + (j & -j)
            if k <= self.cap:
                self.tree[k] += self.tree[j]

    def append(self, x: float) -> None:
        self.w.append(0.0)
        self.n += 1
        if self.n > self.cap:
            self._grow()
        self.set(self.n - 1, x)

    def set(self, i: int, x: float) -> None:
        d = x - self.w[i]
        if d == 0:
            return
        self.w[i] = x
        j = i + 1
        while j <= self.cap:
            self.tree[j] += d
            j += j & -j

    def total(self) -> float:
        s, j = 0.0, self.cap
        while j > 0:
            s += self.tree[j]
            j -= j & -j
        return s

    def draw(self, rng: random.Random) -> int | None:
        tot = self.total()
        if tot <= 1e-12:
            return None
        r = rng.random() * tot
        pos, step = 0, self.cap
        while step:
            nxt = pos + step
            if nxt <= self.cap and self.tree[nxt] <= r:
                r -= self.tree[nxt]
                pos = nxt
            step >>= 1
        return min(pos, self.n - 1)


def energy(c: Corpus, e: Entry) -> float:
    # sum(1 / hits[k] for k in e.feats), the same divisions added in the same order, looped in C
    w = sum(map(truediv, repeat(1), map(c.hits.__getitem__, e.feats))) / math.sqrt(1 + e.picked)
    w *= 4 if e.slots else 1
    w *= 8 if e.near else 1
    return w / (1 + e.units / 500)


class Scheduler:
    def __init__(self, corpus: Corpus, rng: random.Random) -> None:
        self.corpus, self.rng = corpus, rng
        self.pools = {"near": SumTree(), "fav": SumTree(), "all": SumTree()}
        self.cursor = 0
        self.reweighed = 0      # energies computed: the cost the throughput benchmark follows

    def _set(self, i: int) -> None:
        e = self.corpus.entries[i]
        w = energy(self.corpus, e)
        self.reweighed += 1
        p = self.pools
        while p["all"].n <= i:
            for t in p.values():
                t.append(0.0)
        p["all"].set(i, w)
        p["fav"].set(i, w if e.held > 0 else 0.0)
        p["near"].set(i, w if e.near else 0.0)

    def changed(self, indices: set[int]) -> None:
        for i in sorted(indices):
            self._set(i)

    def tick(self) -> None:
        """One execution's share of upkeep: REFRESH entries re-weighed, round-robin."""
        n = len(self.corpus)
        for _ in range(min(REFRESH, n)):
            self.cursor = (self.cursor + 1) % n
            self._set(self.cursor)

    def pick(self) -> Entry:
        r = self.rng.random()
        order = ("near", "fav", "all") if r < 0.3 else ("fav", "all") if r < 0.8 else ("all",)
        for name in order:
            i = self.pools[name].draw(self.rng)
            if i is not None:
                break
        else:
            i = self.rng.randrange(len(self.corpus))
        e = self.corpus.entries[i]
        e.picked += 1
        self._set(i)
        return e
