"""The in-memory corpus of one search: kept inputs, the features seen, who holds each feature.

An input is kept when its run shows a feature never seen before, or shows one at under half the
cost of its cheapest holder so far (libFuzzer's -reduce_inputs, AFL's top_rated). Adding an entry
costs O(its features): nothing here walks the corpus, so a corpus of thousands costs an
execution what a corpus of ten does. The scheduler (epfuzz.search.scheduler) is told what changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epfuzz.search.feedbacks import Feature


@dataclass
class Entry:
    data: bytes
    feats: frozenset[Feature]
    slack: int          # smallest slack bucket over its phases (lower: closer to a stale accept)
    near: bool          # a near miss (see scheduler.energy)
    units: int          # TLPs in its run: the cost of one execution
    picked: int = 0
    held: int = 0       # features it is the cheapest holder of (> 0: favoured)
    slots: int = 0      # phases whose smallest slack it holds (IJON's slots)
    source: str = ""    # the move that made it, "seed", or "sync" (another job's)


def slack_of(feats: set[Feature]) -> int:
    return min((k[-1] for k in feats if k[0] == "slack"), default=64)


def near_of(feats: set[Feature]) -> bool:
    """A reordering between two stores to the same bytes (half of a race on a signal word) or an
    accept within a TLP of a final phase's data (half of a stale accept)."""
    return any((k[0] == "ro" and k[-1] is True) or (k[0] == "slack" and k[2] == "final" and 0 <= k[-1] <= 1)
               for k in feats)


@dataclass
class Corpus:
    entries: list[Entry] = field(default_factory=list)
    seen: set[Feature] = field(default_factory=set)
    hits: dict[Feature, int] = field(default_factory=dict)     # feature -> runs that showed it
    top: dict[Feature, int] = field(default_factory=dict)      # feature -> its cheapest holder
    best_slot: dict[tuple[object, ...], tuple[int, int]] = field(default_factory=dict)  # phase -> (slack, idx)

    def __len__(self) -> int:
        return len(self.entries)

    def observe(self, data: bytes, feats: set[Feature], units: int, source: str = "") -> tuple[int | None, set[int]]:
        """Count the run's features; keep `data` if it is new or cheaper. Returns (its index or None,
        indices of entries whose standing changed: the scheduler re-weighs those)."""
        hits = self.hits
        for k in feats:
            hits[k] = hits.get(k, 0) + 1
        fresh = feats - self.seen
        cheaper = [k for k in feats if k in self.top and units * 2 < self.entries[self.top[k]].units]
        if not fresh and not cheaper:
            return None, set()
        self.seen |= fresh
        idx = len(self.entries)
        e = Entry(data, frozenset(feats), slack_of(feats), near=near_of(feats), units=units, source=source)
        self.entries.append(e)
        changed = {idx}
        for k in feats:
            old = self.top.get(k)
            if old is None or units < self.entries[old].units:
                if old is not None:
                    self.entries[old].held -= 1
                    changed.add(old)
                self.top[k] = idx
                e.held += 1
            if k[0] == "slack":
                phase = k[1:-1]
                prev = self.best_slot.get(phase)
                if prev is None or k[-1] < prev[0]:
                    if prev is not None:
                        self.entries[prev[1]].slots -= 1
                        changed.add(prev[1])
                    self.best_slot[phase] = (k[-1], idx)
                    e.slots += 1
        return idx, changed
