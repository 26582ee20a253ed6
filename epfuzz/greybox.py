"""The in-process greybox loop behind `epfuzz fuzz --engine guided`.

libFuzzer with atheris pays a process start-up and per-execution instrumentation,
and its byte-level moves know nothing of schedules: on the deep zoo it ran a
handful of executions a second where random inputs through the decoder ran about
a hundred. This loop runs the emulator in-process with no line coverage. Its
feedback is epfuzz.feedback's semantic features (reorder pairs, reads-from,
slack per phase, protocol state, shape waypoints): an input is kept when it shows
one never seen before. Its moves are the IR's (epfuzz.mutator) plus the PCT
sampler (epfuzz.sampler), mostly *extending* a kept input's schedule by one
change point, so a kept "trailer passed a middle TLP" needs only the signal's
overtake on top. Energy (AFL's word for how often an input is mutated) goes to
inputs that were first to show many features, that hold an IJON-style slot (the
smallest slack of a protocol phase: closest to a stale accept) and that are
cheap (fewer TLPs: faster runs, and a change point hits the right event more
often). A share of fresh random inputs through the decoder keeps it close to
random search where bugs are shallow.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from epfuzz import codec
from epfuzz.feedback import Feature, features
from epfuzz.mutator import byte_edit, field_bounds
from epfuzz.protocols.base import Protocol
from epfuzz.sampler import sample_schedule
from epfuzz.scenario import Scenario
from epfuzz.sim.engine import SimRun, build, simulate

MAX_LEN = 256
MAX_SCHEDULE = 16      # the decoder's cap on overtakes
REWEIGH = 32           # executions between recomputations of the energies
BASES = 256            # configurations whose unscheduled run is kept for the sampler
#: (move, weight). "fresh" is random bytes as the random baseline draws them; "fresh+pct" gives them a
#: sampled schedule; "extend" adds 1-2 change points to a kept schedule, "resample" replaces it, "shift" nudges
#: one overtake; "field"/"suffix"/"bytes" change the configuration (epfuzz.mutator's moves), "shrink" sets one
#: field to its simplest value (zero bytes), which the cheaper-holder rule keeps when the feature survives
MOVES = (("fresh", 2), ("fresh+pct", 4), ("extend", 6), ("resample", 2), ("shift", 2), ("field", 2),
         ("shrink", 1), ("suffix", 1), ("bytes", 1))


@dataclass
class Entry:
    data: bytes
    feats: frozenset[Feature]
    slack: int          # smallest slack bucket over its phases (lower: closer to a stale accept)
    near: bool          # a near miss (see Greybox._energy)
    units: int          # TLPs in its run: the cost of one execution
    picked: int = 0


@dataclass
class Step:
    data: bytes
    scenario: Scenario
    run: SimRun
    move: str
    kept: bool


def _slack(feats: set[Feature]) -> int:
    return min((k[-1] for k in feats if k[0] == "slack"), default=64)


def _near(feats: set[Feature]) -> bool:
    return any((k[0] == "ro" and k[-1] is True) or (k[0] == "slack" and k[2] == "final" and 0 <= k[-1] <= 1)
               for k in feats)


class Greybox:
    """Corpus, feature map and scheduler of one search; `step()` is one execution, deterministic per seed."""

    def __init__(self, protocol: str, proto: Protocol, seed: int, preset: str = "spec",
                 execute: Callable[[Scenario, Protocol], SimRun] = simulate) -> None:
        self.protocol, self.proto, self.preset = protocol, proto, preset
        self.execute = execute
        self.rng = random.Random(seed)
        self.seen: set[Feature] = set()
        self.slots: dict[tuple[object, ...], tuple[int, int]] = {}   # phase -> (best slack, corpus index)
        self.corpus: list[Entry] = []
        self.top: dict[Feature, int] = {}       # feature -> its cheapest holder in the corpus
        self.hits: dict[Feature, int] = {}      # feature -> runs that showed it
        self._cache: dict[str, tuple[list[int], list[float]]] = {}
        self._weights_at: int | None = None
        self._near_added = False                 # a near miss was kept since the energies were computed
        self._bases: dict[Scenario, SimRun] = {}   # a configuration's run without a schedule, for the sampler
        self.execs = 0
        self._names = [m for m, _ in MOVES]
        self._weights = [w for _, w in MOVES]

    # ---------------------------------------------------------------- feedback
    def observe(self, data: bytes, run: SimRun) -> bool:
        """Keep `data` when its run shows a feature not seen before, or shows one at under half the
        cost of its cheapest holder so far (libFuzzer's -reduce_inputs, AFL's top_rated)."""
        feats = features(run)
        for k in feats:
            self.hits[k] = self.hits.get(k, 0) + 1
        units = sum(t.n for t in run.order)
        fresh = feats - self.seen
        cheaper = [k for k in feats & self.seen if units * 2 < self.corpus[self.top[k]].units]
        if not fresh and not cheaper:
            return False
        self.seen |= fresh
        idx = len(self.corpus)
        self.corpus.append(Entry(data, frozenset(feats), _slack(feats), near=_near(feats), units=units))
        self._near_added = self._near_added or self.corpus[-1].near
        for k in feats:
            if k not in self.top or units < self.corpus[self.top[k]].units:
                self.top[k] = idx
            if k[0] == "slack":
                phase = k[1:-1]
                if phase not in self.slots or k[-1] < self.slots[phase][0]:
                    self.slots[phase] = (k[-1], idx)
        return True

    def _energy(self, i: int, e: Entry, slot_holders: set[int]) -> float:
        """Rarity (Entropic's idea, AFLFast's rare edges), times a bonus for a near miss: a reordering
        between two stores to the same bytes (half of a race on a signal word) or an accept within a
        TLP of its data (half of a stale accept), held by an input a mutant can build on."""
        w = sum(1 / self.hits[k] for k in e.feats) / math.sqrt(1 + e.picked)
        w *= 4 if i in slot_holders else 1
        w *= 8 if e.near else 1
        return w / (1 + e.units / 500)

    def _pick(self) -> Entry:
        """An entry by energy: from the near misses (IJON's slots: a fixed share of the picks, so a
        half-made race is not drowned by the many inputs that are new in some unrelated way) 3 times
        in 10, from the favoured ones (cheapest holder of some feature) 5 in 10, else from all.

        Energies are recomputed every REWEIGH executions, or at once when a near miss was kept, not per
        pick: with hundreds of entries the rarity sums would cost more than a run of the emulator."""
        if self._weights_at is None or self.execs - self._weights_at >= REWEIGH or self._near_added:
            holders = {i for _, i in self.slots.values()}
            pools = {"near": [i for i, e in enumerate(self.corpus) if e.near],
                     "fav": sorted(set(self.top.values())), "all": list(range(len(self.corpus)))}
            self._cache = {name: (pool, [self._energy(i, self.corpus[i], holders) for i in pool])
                           for name, pool in pools.items()}
            self._weights_at, self._near_added = self.execs, False
        r = self.rng.random()
        name = "near" if r < 0.3 and self._cache["near"][0] else ("fav" if r < 0.8 else "all")
        pool, weights = self._cache[name]
        e = self.corpus[self.rng.choices(pool, weights)[0]]
        e.picked += 1
        return e

    # ---------------------------------------------------------------- moves
    def _random_bytes(self) -> bytes:
        return self.rng.randbytes(self.rng.randrange(0, 129))

    def _with_schedule(self, data: bytes, move: str) -> bytes:
        scn = codec.decode(data, self.protocol, self.preset)
        keep = scn.schedule if move == "extend" else ()
        keep = keep[len(keep) - (MAX_SCHEDULE - 2):] if len(keep) > MAX_SCHEDULE - 2 else keep
        depth = self.rng.randint(1, 2) if move == "extend" else None
        config = scn.replace(schedule=())
        base = self._bases.get(config)
        if base is None:
            if len(self._bases) >= BASES:
                self._bases.clear()
            base = self._bases[config] = build(config, self.proto)
        sched = sample_schedule(scn, self.proto, self.rng, depth=depth, keep=keep, focus=True, base=base)
        return codec.encode(scn.replace(schedule=sched))

    def _shift(self, data: bytes) -> bytes:
        scn = codec.decode(data, self.protocol, self.preset)
        if not scn.schedule:
            return self._with_schedule(data, "extend")
        sched = list(scn.schedule)
        i = self.rng.randrange(len(sched))
        o = sched[i]
        if self.rng.random() < 0.5:
            step = self.rng.choice((-4, -2, -1, 1, 2, 4))
            sched[i] = dataclasses.replace(o, distance=max(1, min(64, o.distance + step)))
        else:
            sched[i] = dataclasses.replace(o, index=max(0, o.index + self.rng.choice((-2, -1, 1, 2))))
        return codec.encode(scn.replace(schedule=tuple(sched)))

    def _config(self, data: bytes, move: str) -> bytes:
        if move == "bytes" or not data:
            return byte_edit(data, MAX_LEN, self.rng)
        starts = field_bounds(data, codec.decoder_for(self.protocol, self.preset))
        if not starts:
            return byte_edit(data, MAX_LEN, self.rng)
        i = self.rng.randrange(len(starts))
        at = starts[i]
        end = starts[i + 1] if i + 1 < len(starts) else at + 2
        if move == "field":
            return (data[:at] + self.rng.randbytes(max(1, end - at)) + data[end:])[:MAX_LEN]
        if move == "shrink":
            return data[:at] + bytes(max(1, end - at)) + data[end:]
        return (data[:at] + self.rng.randbytes(self.rng.randrange(1, 64)))[:MAX_LEN]

    def next_input(self) -> tuple[bytes, str]:
        move = self.rng.choices(self._names, self._weights)[0]
        if not self.corpus and not move.startswith("fresh"):
            move = "fresh"
        if move == "fresh":
            return self._random_bytes(), move
        if move == "fresh+pct":
            return self._with_schedule(self._random_bytes(), move), move
        base = self._pick().data
        if move in ("extend", "resample"):
            return self._with_schedule(base, move), move
        if move == "shift":
            return self._shift(base), move
        return self._config(base, move), move

    def step(self) -> Step:
        data, move = self.next_input()
        return self.try_input(data, move)

    def try_input(self, data: bytes, move: str = "seed") -> Step:
        """Run one input (a mutant, or a seed from a corpus folder) and keep it if it is new."""
        scn = codec.decode(data, self.protocol, self.preset)
        run = self.execute(scn, self.proto)
        self.execs += 1
        kept = self.observe(data, run)
        return Step(data, scn, run, move, kept)
