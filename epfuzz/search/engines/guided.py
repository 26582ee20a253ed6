"""The guided engine: in-process greybox search over the emulator with semantic feedback.

One `step()` is one execution, deterministic per seed: draw a move (epfuzz.search.moves), a parent
by energy (epfuzz.search.scheduler) when the move needs one, run the mutant once
(epfuzz.search.executor), read its features (epfuzz.search.feedbacks) and keep it in the corpus
if they are new. The first `WARMUP` executions and a share after them are fresh random inputs,
which keeps it close to random search where bugs are shallow; the move weights follow what pays
(epfuzz.search.moves.MoveSet, adapt=True: MOpt's idea), so where the features say nothing about a
bug the fresh moves take more of the draws. Schedule moves mostly *extend* a kept schedule, so a
kept "the tail of a read range passed its middle" needs only the signal's overtake on top.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.search import feedbacks as fb
from epfuzz.search import moves as mv
from epfuzz.search.corpus import Corpus
from epfuzz.search.executor import Execution, SimExecutor
from epfuzz.search.monitor import Monitor
from epfuzz.search.scheduler import Scheduler
from epfuzz.sim.engine import SimRun, simulate

WARMUP = 32     # first executions all fresh (random and sampled inputs): the corpus AFL would be given as seeds


@dataclass
class Step:
    execution: Execution
    move: str
    kept: bool

    @property
    def data(self) -> bytes:
        return self.execution.data

    @property
    def scenario(self) -> Scenario:
        return self.execution.scenario

    @property
    def run(self) -> SimRun:
        return self.execution.run


class Guided:
    def __init__(self, protocol: str, proto: Protocol, seed: int, preset: str = "spec",
                 execute: Callable[[Scenario, Protocol], SimRun] = simulate,
                 feedbacks: Sequence[Any] = fb.DEFAULT, moves: Sequence[mv.Move] = mv.DEFAULT,
                 monitor: Monitor | None = None) -> None:
        self.rng = random.Random(seed)
        self.feedbacks = list(feedbacks)
        around = next((f.around for f in self.feedbacks if hasattr(f, "around")), None)
        self.executor = SimExecutor(protocol, proto, preset, execute, around)
        self.ctx = mv.Context(protocol, proto, preset)
        self.moves = mv.MoveSet(moves, adapt=True)
        self.corpus = Corpus()
        self.scheduler = Scheduler(self.corpus, self.rng)
        self.monitor = monitor or Monitor()
        self.parent = b""

    @property
    def execs(self) -> int:
        return self.executor.execs

    def next_input(self) -> tuple[bytes, str]:
        move = self.moves.draw(self.rng, have_parent=len(self.corpus) > 0 and self.execs >= WARMUP)
        parent = self.scheduler.pick().data if move.kind != "fresh" and len(self.corpus) else b""
        self.parent = parent  # what the move read: a campaign saves it if the move ran past a limit
        ctx = self.ctx
        ctx.made = None
        data = move.fn(ctx, parent, self.rng)
        return data, move.name

    def try_input(self, data: bytes, move: str = "seed") -> Step:
        """Run one input (a mutant, a seed, another job's input) and keep it if it shows something new.

        Where the move made `data` from a scenario (`Context.emit`: the very bytes object it returned),
        that scenario is run: it is what `data` decodes to, so decoding it again would only cost time."""
        ctx = self.ctx
        made, ctx.made = ctx.made, None
        if made is not None and made[0] is data:
            ex = self.executor.run_scenario(made[1], data)
        else:
            ex = self.executor.run(data)
        feats: set[fb.Feature] = set()
        ids = self.corpus.ids            # every feature seen so far
        run = ex.run
        for f in self.feedbacks:
            got = f.fn(run)
            if type(got) is set or type(got) is frozenset:
                # set differences test membership with the hashes the set holds: no feature hashed again
                new = len(got.difference(feats).difference(ids))
            else:
                new = sum(1 for k in got if k not in ids and k not in feats)
            self.monitor.new_features(f.name, new)
            feats |= got
        idx, changed = self.corpus.observe(data, feats, ex.units, move)
        if idx is not None:
            ctx.remember(data, ex.scenario)     # a kept input is a parent to be: its moves need not decode it
            from epfuzz.sim.engine import FORMS

            FORMS.keep(ex.scenario, self.ctx.proto)  # and its moves come back to its configuration's built form
        if changed:
            self.scheduler.changed(changed)
        self.scheduler.tick()
        m = self.monitor
        self.moves.reward(move, idx is not None or ex.violation is not None)
        m.executed(move, idx is not None, ex.violation is not None)
        m.features, m.corpus = len(self.corpus.seen), len(self.corpus)
        return Step(ex, move, idx is not None)

    def step(self) -> Step:
        return self.try_input(*self.next_input())
