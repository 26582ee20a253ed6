"""The libFuzzer engine's parts: its custom mutator is the move registry, its coverage the features.

libFuzzer keeps the corpus and picks the parent; `mutator()` answers atheris' custom-mutator
call with one move of epfuzz.search.moves (schedule moves only where the emulator runs), and
`Counters.emit` (epfuzz.search.feedbacks) turns an execution's features into libFuzzer counters.
No epfuzz module is line-instrumented (epfuzz.continuous.harness): these counters are the coverage, so a
harness sees the same thing whether started as a script or with `python -m`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence

from epfuzz.search import moves as mv


def mutator(ctx: mv.Context, moves: Sequence[mv.Move] = mv.DEFAULT) -> Callable[[bytes, int, int], bytes]:
    ms = mv.MoveSet(moves, sim=ctx.sim)
    told: set[str] = set()

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        move = ms.draw(rng, have_parent=bool(data))
        ctx.max_len = max_size
        try:
            out = move.fn(ctx, data, rng)
        except Exception as e:  # noqa: BLE001 - a mutator must never stop the fuzzer: a byte edit instead
            from epfuzz.protocols import REGISTRY

            # the plug-in's own exception shows again when an input runs it; any other is a bug in a
            # move, said once per move (it was swallowed silently: issue 34.1's overflow went unseen)
            if not REGISTRY.where(e) and move.name not in told:
                told.add(move.name)
                sys.stderr.write(f"epfuzz: move {move.name} raised {type(e).__name__}: {e} (a bug in epfuzz or "
                                 "in a --moves plug-in; a byte edit instead, and this move's later errors unsaid)\n")
            out = mv.byte_edit(data, max_size, rng)
        return out[:max_size]

    return mutate
