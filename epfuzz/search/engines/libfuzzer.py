"""The libFuzzer engine's parts: its custom mutator is the move registry, its coverage the features.

libFuzzer keeps its corpus on disk (what ClusterFuzzLite prunes, merges and stores) and runs what
the custom mutator returns. `Counters.emit` (epfuzz.search.feedbacks) turns an execution's
features into libFuzzer counters, so its corpus is the inputs new in the guided engine's terms.
No epfuzz module is line-instrumented (epfuzz.continuous.harness): these counters are the
coverage, so a harness sees the same thing whether started as a script or with `python -m`.

On the sim the mutator does not leave the search to libFuzzer: libFuzzer picks the parent with its
own energy (Entropic over counters) and mutates it up to five times in a row, and a custom mutator
sees only those bytes, so the harness ran a different search from the guided engine's (3.7-11x its
executions on 8 of 14 deep bugs, bench/search-issue27.md). `Steer` is the guided engine's search in
the process: the harness hands it every execution's features (`observe`), it keeps them in the
same corpus and scheduler (epfuzz.search.corpus, epfuzz.search.scheduler) with the same adaptive
move weights and warm-up (epfuzz.search.moves, epfuzz.search.engines.guided), and the mutator
mutates its pick; libFuzzer's own pick is the parent `LIBFUZZER_SHARE` of the time, one more
parent. Each process (-fork children, -jobs workers) has its own Steer, fed by what it runs:
inputs of other jobs that libFuzzer loads are observed like any other. Its corpus is bounded
(`Steer.CAP`).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence

from epfuzz.search import moves as mv
from epfuzz.search.corpus import Corpus
from epfuzz.search.engines.guided import WARMUP
from epfuzz.search.feedbacks import Feature
from epfuzz.search.scheduler import Scheduler

LIBFUZZER_SHARE = 0.1   # mutants whose parent is the one libFuzzer handed over


class Steer:
    """The guided engine's corpus, scheduler and move weights, fed by the executions libFuzzer runs."""

    CAP = 4096          # kept inputs; past it the corpus is rebuilt from the holders of its features

    def __init__(self, moves: Sequence[mv.Move] = mv.DEFAULT, sim: bool = True, cap: int = CAP) -> None:
        self.moves = mv.MoveSet(moves, sim=sim, adapt=True)
        self.rng = random.Random(0)
        self.seeded = False
        self.cap = cap
        self.corpus = Corpus()
        self.scheduler = Scheduler(self.corpus, self.rng)
        self.execs = 0
        self.rebuilds = 0
        self.pending: tuple[bytes, str] | None = None   # the last mutant and its move, until it runs

    def choose(self, data: bytes, seed: int) -> tuple[mv.Move, bytes]:
        """The move and the parent it mutates: the guided engine's draw, libFuzzer's `data` as one more parent."""
        if not self.seeded:   # libFuzzer's seed (its -seed, or its own draw): each process its own stream
            self.rng.seed(seed)
            self.seeded = True
        rng = self.rng
        have = self.execs >= WARMUP and (len(self.corpus) > 0 or bool(data))
        move = self.moves.draw(rng, have_parent=have)
        if move.kind == "fresh":
            return move, b""
        if len(self.corpus) and rng.random() >= LIBFUZZER_SHARE:
            return move, self.scheduler.pick().data
        return move, data

    def made(self, out: bytes, move: str) -> None:
        self.pending = (out, move)

    def observe(self, data: bytes, feats: set[Feature], units: int, violation: bool) -> bool:
        """One execution libFuzzer ran (a mutant, a seed, another job's input): keep it if it is new; True if kept."""
        self.execs += 1
        source = "libfuzzer"
        if self.pending is not None and self.pending[0] == data:
            source = self.pending[1]
        self.pending = None
        idx, changed = self.corpus.observe(data, feats, units, source)
        if changed:
            self.scheduler.changed(changed)
        self.scheduler.tick()
        self.moves.reward(source, idx is not None or violation)
        if len(self.corpus) > self.cap:
            self._rebuild()
        return idx is not None

    def _rebuild(self) -> None:
        """Keep the entries that hold a feature or a slot (at most half the cap, the most held first):
        every feature seen stays held, so what is new stays what the guided engine would call new."""
        old = self.corpus.entries
        keep = sorted((i for i, e in enumerate(old) if e.held or e.slots),
                      key=lambda i: -(old[i].held + old[i].slots))[:self.cap // 2]
        self.corpus = Corpus()
        self.scheduler = Scheduler(self.corpus, self.rng)
        for i in sorted(keep):
            e = old[i]
            idx, changed = self.corpus.observe(e.data, set(e.feats), e.units, e.source)
            if idx is not None:
                self.corpus.entries[idx].picked = e.picked
            self.scheduler.changed(changed)
        self.rebuilds += 1


def mutator(ctx: mv.Context, moves: Sequence[mv.Move] = mv.DEFAULT,
            steer: Steer | None = None) -> Callable[[bytes, int, int], bytes]:
    """atheris' custom mutator: one move of the registry; its parent is `steer`'s pick where there is
    one, else the bytes libFuzzer handed over."""
    ms = steer.moves if steer is not None else mv.MoveSet(moves, sim=ctx.sim)
    told: set[str] = set()

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        if steer is not None:
            move, parent = steer.choose(data, seed)
            rng = steer.rng
        else:
            rng = random.Random(seed)
            move, parent = ms.draw(rng, have_parent=bool(data)), data
        ctx.max_len = max_size
        try:
            out = move.fn(ctx, parent, rng)
        except Exception as e:  # noqa: BLE001 - a mutator must never stop the fuzzer: a byte edit instead
            from epfuzz.protocols import REGISTRY

            # the plug-in's own exception shows again when an input runs it; any other is a bug in a
            # move, said once per move (it was swallowed silently: issue 34.1's overflow went unseen)
            if not REGISTRY.where(e) and move.name not in told:
                told.add(move.name)
                sys.stderr.write(f"epfuzz: move {move.name} raised {type(e).__name__}: {e} (a bug in epfuzz or "
                                 "in a --moves plug-in; a byte edit instead, and this move's later errors unsaid)\n")
            out = mv.byte_edit(parent, max_size, rng)
        out = out[:max_size]
        if steer is not None:
            steer.made(out, move.name)
        return out

    return mutate
