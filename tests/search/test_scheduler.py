"""Corpus and scheduler: what is kept, and energy at a cost that does not grow with the corpus."""

from __future__ import annotations

import random

from epfuzz.search.corpus import Corpus
from epfuzz.search.scheduler import REFRESH, Scheduler, SumTree


def test_the_sum_tree_draws_in_proportion_to_its_weights():
    rng = random.Random(1)
    t, w = SumTree(), []
    for i in range(100):
        x = rng.random()
        t.append(x)
        w.append(x)
        if i % 7 == 0:
            j = rng.randrange(len(w))
            w[j] = 0.0
            t.set(j, 0.0)
    assert abs(t.total() - sum(w)) < 1e-9
    counts = [0] * len(w)
    for _ in range(50_000):
        counts[t.draw(rng)] += 1
    assert all(counts[i] == 0 for i, x in enumerate(w) if x == 0)
    assert max(abs(c / 50_000 - x / sum(w)) for c, x in zip(counts, w, strict=True)) < 0.01


def test_an_input_is_kept_when_new_or_much_cheaper():
    c = Corpus()
    assert c.observe(b"a", {("x", 1)}, units=100)[0] == 0
    assert c.observe(b"b", {("x", 1)}, units=80)[0] is None        # not under half the cost
    idx, changed = c.observe(b"c", {("x", 1)}, units=40)
    assert idx == 1 and changed == {0, 1} and c.holder(("x", 1)) == 1
    assert c.entries[0].held == 0 and c.entries[1].held == 1


def test_energy_upkeep_per_execution_is_bounded_whatever_the_corpus_size():
    """Energies computed per execution: the same for a corpus of 50 and of 5,000 (the old loop
    recomputed all of them every 32 executions, and drew over the whole corpus)."""
    def per_exec(n: int) -> float:
        c = Corpus()
        s = Scheduler(c, random.Random(0))
        for i in range(n):
            idx, changed = c.observe(bytes([i % 256, i // 256]), {("f", i)}, units=10)
            s.changed(changed)
        before = s.reweighed
        for _ in range(200):
            s.pick()
            s.tick()
        return (s.reweighed - before) / 200

    small, large = per_exec(50), per_exec(5000)
    assert small == large == REFRESH + 1


def test_near_misses_are_picked_more_often():
    c = Corpus()
    s = Scheduler(c, random.Random(3))
    for i in range(200):
        feats = {("f", i)} | ({("slack", 0, "final", "data", "tail", 1)} if i == 7 else set())
        s.changed(c.observe(bytes([i]), feats, units=10)[1])
    assert c.entries[7].near
    picks = [s.pick().data for _ in range(2000)]
    assert picks.count(bytes([7])) > 2000 * 0.2


def test_each_feature_is_stored_once_and_an_entry_holds_ids():
    """An entry's features are an array of ids into one table, not its own feature tuples: the
    corpus's memory grows by bytes per kept input."""
    c = Corpus()
    c.observe(b"a", {("x", 1), ("y", 2)}, units=100)
    c.observe(b"b", {("x", 1), ("z", 3)}, units=100)
    assert len(c.seen) == 3 and ("z", 3) in c.seen
    e0, e1 = c.entries
    assert e0.feats.typecode == "I" and list(e1.feats) == sorted([c.ids[("x", 1)], c.ids[("z", 3)]])
    assert c.hits[c.ids[("x", 1)]] == 2 and c.holder(("x", 1)) == 0 and c.holder(("q", 0)) is None
