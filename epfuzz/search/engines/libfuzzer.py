"""The libFuzzer engine's parts: its custom mutator is the move registry, its coverage the features.

libFuzzer keeps its corpus on disk (what ClusterFuzzLite prunes, merges and stores) and runs what
the custom mutator returns. `Counters.emit` (epfuzz.search.feedbacks) turns an execution's
features into libFuzzer counters, so its corpus is the inputs new in the guided engine's terms.
No epfuzz module is line-instrumented (epfuzz.continuous.harness): these counters are the
coverage, so a harness sees the same thing whether started as a script or with `python -m`.

On the sim the mutator does not leave the search to libFuzzer: libFuzzer picks the parent with its
own energy (Entropic over counters) and mutates it up to five times in a row, and a custom mutator
sees only those bytes, so the harness ran a different search from the guided engine's (3.7-11x its
executions on 8 of 14 deep bugs, bench/search-issue27.md). `Steer` runs the guided engine itself in
the process: the harness hands it every execution (`observe`: the run and the features it read for
the counters), the engine keeps it in its corpus and scheduler as if it had run it, and the mutator
returns the engine's next input (its move on its pick, with its warm-up and adaptive move weights);
libFuzzer's own pick is the parent `LIBFUZZER_SHARE` of the time, one more parent. Each process
(-fork children, -jobs workers) has its own Steer, fed by what it runs: inputs of other jobs that
libFuzzer loads are observed like any other. Its corpus is bounded (`Steer.CAP`).
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections.abc import Callable, Sequence

from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.search import moves as mv
from epfuzz.search.corpus import Corpus
from epfuzz.search.engines.guided import WARMUP, Guided
from epfuzz.search.feedbacks import Feature, Feedback
from epfuzz.sim.engine import SimRun

LIBFUZZER_SHARE = 0.1   # mutants whose parent is the one libFuzzer handed over


class Steer:
    """The guided engine (epfuzz.search.engines.guided.Guided) inside libFuzzer's loop.

    `Guided` itself draws each move and parent (`next_input`) and judges each execution
    (`try_input`), so the harness runs the guided engine's search as that engine is tuned; only its
    executor is the harness: the run `observe` is handed is the run `try_input` sees, and its
    features are the ones the harness already read for libFuzzer's counters (computed once).
    """

    CAP = 4096          # kept inputs; past it the search restarts from its feature holders (`_restart`)

    def __init__(self, protocol: str, proto: Protocol, preset: str = "spec",
                 moves: Sequence[mv.Move] = mv.DEFAULT, cap: int = CAP) -> None:
        self.protocol, self.proto, self.preset, self.cap = protocol, proto, preset, cap
        self._moves = [dataclasses.replace(m, fn=self._named(m)) for m in moves]
        self._run: SimRun | None = None
        self._feats: set[Feature] = set()
        self.guided = self._engine()
        self.seeded = False
        self.current = ""                               # the move running now (named in its error)
        self.pending: tuple[bytes, str] | None = None   # the last mutant and its move, until it runs
        self.replay: list[bytes] = []                   # holders to run again after a restart
        self.restarts = 0

    def _named(self, m: mv.Move) -> Callable[[mv.Context, bytes, random.Random], bytes]:
        fn = m.fn

        def run(ctx: mv.Context, data: bytes, rng: random.Random) -> bytes:
            self.current = m.name
            return fn(ctx, data, rng)
        return run

    def _engine(self) -> Guided:
        return Guided(self.protocol, self.proto, 0, self.preset, execute=self._executed,
                      feedbacks=[Feedback("harness", self._features, "the features the harness read")],
                      moves=self._moves)

    def _executed(self, scn: Scenario, proto: Protocol) -> SimRun:
        assert self._run is not None, "Steer: try_input outside observe"
        return self._run

    def _features(self, run: SimRun) -> set[Feature]:
        return self._feats

    @property
    def corpus(self) -> Corpus:
        return self.guided.corpus

    @property
    def moves(self) -> mv.MoveSet:
        return self.guided.moves

    @property
    def execs(self) -> int:
        return self.guided.execs

    def next_input(self, data: bytes, max_size: int, seed: int) -> tuple[bytes, str]:
        """The mutant and its move: the guided engine's, or a move on libFuzzer's `data` (one more parent)."""
        g = self.guided
        if not self.seeded:   # libFuzzer's seed (its -seed, or its own draw): each process its own stream
            g.rng.seed(seed)
            self.seeded = True
        if self.replay:
            return self.replay.pop(), "replay"
        g.ctx.max_len = max_size
        self.current = ""
        if data and g.execs >= WARMUP and len(g.corpus) and g.rng.random() < LIBFUZZER_SHARE:
            move = g.moves.draw(g.rng)
            g.parent = parent = b"" if move.kind == "fresh" else data
            return move.fn(g.ctx, parent, g.rng), move.name
        return g.next_input()

    def made(self, out: bytes, move: str) -> None:
        self.pending = (out, move)

    def observe(self, data: bytes, run: SimRun, feats: set[Feature], scenario: Scenario | None = None) -> bool:
        """One execution libFuzzer ran (a mutant, a seed, another job's input), judged by the guided
        engine as its own; True if kept. `scenario`: what `data` decodes to under this protocol and preset, where
        the caller decoded it (the harness): the engine takes it instead of decoding `data` a second time."""
        move = self.pending[1] if self.pending is not None and self.pending[0] == data else "libfuzzer"
        self.pending = None
        self._run, self._feats = run, feats
        if scenario is not None:  # `Guided.try_input` runs a scenario handed along with the very bytes object
            self.guided.ctx.made = (data, scenario)
        try:
            kept = self.guided.try_input(data, move).kept
        finally:
            self._run, self._feats = None, set()
        if len(self.guided.corpus) > self.cap:
            self._restart()
        return kept

    def _restart(self) -> None:
        """Bound the state: a fresh engine (its move weights, RNG and warm-up kept), and the entries
        that held a feature or a slot (at most half the cap, the most held first) run again as the next
        mutants, so its corpus is rebuilt from what they show, whatever the corpus stores per entry."""
        old = self.guided
        entries = old.corpus.entries
        keep = sorted((e for e in entries if e.held or e.slots), key=lambda e: -(e.held + e.slots))
        self.replay = [e.data for e in reversed(keep[:self.cap // 2])]
        new = self._engine()
        new.rng, new.moves, new.monitor = old.rng, old.moves, old.monitor
        new.scheduler.rng = old.rng
        new.executor.execs = old.executor.execs
        self.guided = new
        self.restarts += 1


def mutator(ctx: mv.Context, moves: Sequence[mv.Move] = mv.DEFAULT,
            steer: Steer | None = None) -> Callable[[bytes, int, int], bytes]:
    """atheris' custom mutator: one move of the registry, drawn (with its parent) by `steer`'s guided
    engine where there is one (the sim), else on the bytes libFuzzer handed over."""
    ms = mv.MoveSet(moves, sim=ctx.sim)
    told: set[str] = set()

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        name = ""
        try:
            if steer is not None:
                out, name = steer.next_input(data, max_size, seed)
            else:
                move = ms.draw(rng, have_parent=bool(data))
                name = move.name
                ctx.max_len = max_size
                out = move.fn(ctx, data, rng)
        except Exception as e:  # noqa: BLE001 - a mutator must never stop the fuzzer: a byte edit instead
            from epfuzz.protocols import REGISTRY

            name = steer.current if steer is not None else name
            # the plug-in's own exception shows again when an input runs it; any other is a bug in a
            # move, said once per move (it was swallowed silently: issue 34.1's overflow went unseen)
            if not REGISTRY.where(e) and name not in told:
                told.add(name)
                sys.stderr.write(f"epfuzz: move {name} raised {type(e).__name__}: {e} (a bug in epfuzz or "
                                 "in a --moves plug-in; a byte edit instead, and this move's later errors unsaid)\n")
            out = mv.byte_edit(data, max_size, rng)
        out = out[:max_size]
        if steer is not None:
            steer.made(out, name)
        return out

    return mutate
