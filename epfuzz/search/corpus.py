"""The in-memory corpus of one search: kept inputs, the features seen, who holds each feature.

An input is kept when its run shows a feature never seen before, or shows one at under half the
cost of its cheapest holder so far (libFuzzer's -reduce_inputs, AFL's top_rated). Adding an entry
costs O(its features): nothing here walks the corpus, so a corpus of thousands costs an
execution what a corpus of ten does. The scheduler (epfuzz.search.scheduler) is told what changed.

Storage is compact so that memory grows with the corpus by bytes, not by objects: each feature
(a tuple) is stored once, interned to a small integer id, and an entry holds its features as an
array of 4-byte ids (a kept input's own tuples held in a frozenset cost ~100 bytes a feature:
a long run's RSS grew with its corpus by that). Counts and holders are lists indexed by id.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, KeysView
from dataclasses import dataclass, field

from epfuzz.search.featcore import count_features
from epfuzz.search.feedbacks import Feature


@dataclass
class Entry:
    data: bytes
    feats: array[int]   # ids of its run's features (Corpus.ids)
    slack: int          # smallest slack bucket over its phases (lower: closer to a stale accept)
    near: bool          # a near miss (see scheduler.energy)
    units: int          # TLPs in its run: the cost of one execution
    picked: int = 0
    held: int = 0       # features it is the cheapest holder of (> 0: favoured)
    slots: int = 0      # phases whose smallest slack it holds (IJON's slots)
    source: str = ""    # the move that made it, "seed", or "sync" (another job's)


def slack_of(feats: Iterable[Feature]) -> int:
    return min((k[-1] for k in feats if k[0] == "slack"), default=64)


def near_of(feats: Iterable[Feature]) -> bool:
    """A reordering between two stores to the same bytes (half of a race on a signal word) or an
    accept within a TLP of a final phase's data (half of a stale accept)."""
    return any((k[0] == "ro" and k[-1] is True) or (k[0] == "slack" and k[2] == "final" and 0 <= k[-1] <= 1)
               for k in feats)


@dataclass
class Corpus:
    entries: list[Entry] = field(default_factory=list)
    ids: dict[Feature, int] = field(default_factory=dict)       # feature -> its id (every feature seen)
    hits: list[int] = field(default_factory=list)               # id -> runs that showed it
    tops: list[int] = field(default_factory=list)               # id -> its cheapest holder (an entry index)
    best_slot: dict[tuple[object, ...], tuple[int, int]] = field(default_factory=dict)  # phase -> (slack, idx)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def seen(self) -> KeysView[Feature]:
        """Every feature seen so far (`len`, `in`)."""
        return self.ids.keys()

    def holder(self, feature: Feature) -> int | None:
        """The index of the cheapest entry that shows `feature`, if one does."""
        i = self.ids.get(feature)
        return None if i is None else self.tops[i]

    def observe(self, data: bytes, feats: set[Feature], units: int, source: str = "") -> tuple[int | None, set[int]]:
        """Count the run's features; keep `data` if it is new or cheaper. Returns (its index or None,
        indices of entries whose standing changed: the scheduler re-weighs those)."""
        ids, hits, tops, entries = self.ids, self.hits, self.tops, self.entries
        idx = len(entries)
        known, fresh, cheaper = count_features(feats, ids, hits, tops, entries, units)   # compiled: the loop per run
        if not fresh and not cheaper:
            return None, set()
        new: list[int] = []
        for k in fresh:
            ids[k] = len(hits)
            new.append(len(hits))
            hits.append(1)
            tops.append(idx)
        e = Entry(data, array("I", sorted(known + new)), slack_of(feats), near=near_of(feats), units=units,
                  source=source)
        e.held = len(new)
        entries.append(e)
        changed = {idx}
        for i in known:
            old = tops[i]
            if units < entries[old].units:
                entries[old].held -= 1
                changed.add(old)
                tops[i] = idx
                e.held += 1
        for k in feats:
            if k[0] == "slack":
                phase = k[1:-1]
                prev = self.best_slot.get(phase)
                if prev is None or k[-1] < prev[0]:
                    if prev is not None:
                        entries[prev[1]].slots -= 1
                        changed.add(prev[1])
                    self.best_slot[phase] = (k[-1], idx)
                    e.slots += 1
        return idx, changed
