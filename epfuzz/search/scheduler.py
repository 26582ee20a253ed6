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

import random

from epfuzz.search.corpus import Corpus, Entry
from epfuzz.search.schedcore import SumTree, energy_of, reweigh

__all__ = ["REFRESH", "Scheduler", "SumTree", "energy"]

REFRESH = 4     # entries re-weighed per execution, round-robin (their hit counts drift)


def energy(c: Corpus, e: Entry) -> float:
    """sum(1 / hits[k] for k in e.feats) / sqrt(1 + picked), times 4 for a slot holder, 8 for a near miss, over
    (1 + units / 500): the same divisions added in the same order, in epfuzz.search.schedcore (compiled)."""
    return energy_of(c.hits, e.feats, e.picked, e.slots, e.near, e.units)


class Scheduler:
    def __init__(self, corpus: Corpus, rng: random.Random) -> None:
        self.corpus, self.rng = corpus, rng
        self.pools = {"near": SumTree(), "fav": SumTree(), "all": SumTree()}
        self._near, self._fav, self._all = self.pools["near"], self.pools["fav"], self.pools["all"]
        self.cursor = 0
        self.reweighed = 0      # energies computed: the cost the throughput benchmark follows

    def _set(self, i: int) -> None:
        self.reweighed += 1
        reweigh(self._near, self._fav, self._all, i, self.corpus.entries[i], self.corpus.hits)

    def changed(self, indices: set[int]) -> None:
        entries, hits = self.corpus.entries, self.corpus.hits
        for i in sorted(indices):
            self.reweighed += 1
            reweigh(self._near, self._fav, self._all, i, entries[i], hits)

    def tick(self) -> None:
        """One execution's share of upkeep: REFRESH entries re-weighed, round-robin."""
        entries, hits = self.corpus.entries, self.corpus.hits
        n = len(entries)
        cursor = self.cursor
        for _ in range(min(REFRESH, n)):
            cursor = (cursor + 1) % n
            self.reweighed += 1
            reweigh(self._near, self._fav, self._all, cursor, entries[cursor], hits)
        self.cursor = cursor

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
