"""Moves: the one registry of named mutations every engine draws from (LibAFL's mutators).

Every byte string decodes to a valid scenario, so a move is `fn(ctx, parent, rng) -> bytes`:

- fresh moves ignore the parent: `fresh` is random bytes as the random baseline draws them,
  `fresh+pct` gives them a sampled schedule (epfuzz.search.sampler);
- schedule moves (sim only: they read the configuration's run): `extend` adds 1-2 change
  points to the parent's schedule (what came close plus one more reordering), `resample`
  replaces it, `shift` nudges one overtake;
- IR moves work on the decoder's draws: `field` redraws one field, `suffix` redraws every
  draw after one, `shrink` sets one field to its simplest value (zero bytes);
- `bytes`: libFuzzer-style byte edits.

The guided engine and the libFuzzer harnesses' custom mutator use this same set, drawn the same way
(epfuzz.search.engines.libfuzzer.Steer). `--moves module:attr`
adds moves (a `Move` or a list of them). An overtake index is at most `MAX_INDEX` (the codec's
bound): a move that would push one past it keeps it in range, so its input always encodes.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from epfuzz.encoding import codec
from epfuzz.search.context import BASES as BASES  # re-exported: the moves' API names them here
from epfuzz.search.context import DECODED as DECODED
from epfuzz.search.context import MAX_LEN as MAX_LEN
from epfuzz.search.context import MAX_SCHEDULE as MAX_SCHEDULE
from epfuzz.search.context import Context as Context
from epfuzz.search.context import field_bounds as field_bounds
from epfuzz.search.context import with_schedule


@dataclass(frozen=True)
class Move:
    name: str
    kind: str          # fresh | schedule | ir | bytes
    weight: float
    fn: Callable[[Context, bytes, random.Random], bytes]
    doc: str = ""


def _random_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randrange(0, 129))


def byte_edit(data: bytes, max_size: int, rng: random.Random) -> bytes:
    """libFuzzer-style byte edits: change, insert, erase or duplicate bytes.

    (atheris.Mutate, libFuzzer's own mutator, refuses to run from a custom mutator with
    atheris 3.0 -- "Fuzz() must be called before Mutate()" -- so the basic edits are done here.)
    """
    b = bytearray(data)
    op = rng.randrange(5)
    if not b or op == 0:
        b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
    elif op == 1:
        b[rng.randrange(len(b))] = rng.randrange(256)
    elif op == 2:
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif op == 3 and len(b) > 1:
        i = rng.randrange(len(b))
        del b[i:i + rng.randrange(1, 4)]
    else:
        i, j = sorted(rng.randrange(len(b) + 1) for _ in range(2))
        b[i:i] = b[i:j]
    return bytes(b[:max_size])


def _schedule(ctx: Context, data: bytes, rng: random.Random, extend: bool) -> bytes:
    from epfuzz.search.sampler import sample_schedule  # the emulator: imported where a schedule move runs

    scn = ctx.decode(data)
    keep = scn.schedule if extend else ()
    keep = keep[len(keep) - (MAX_SCHEDULE - 2):] if len(keep) > MAX_SCHEDULE - 2 else keep
    config = ctx.config_of(data, scn)
    base = ctx.base(config)
    form = ctx.last_form        # ctx.forms.get(config), as `base` just found or made it
    # the base run's TLPs are its built form's arrival order without net overtakes: their QP streams are made
    # once, on that arrival, and the executions over the form (the mutants) use the same
    streams = form.arrived(config, ()).streams if form is not None else None
    sched = sample_schedule(scn, ctx.proto, rng, depth=rng.randint(1, 2) if extend else None, keep=keep,
                            focus=True, base=base, marks=lambda: ctx.marked(config, base), streams=streams)
    return ctx.emit_schedule(data, scn, sched)


def fresh(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    return _random_bytes(rng)


def fresh_pct(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    """The sampler baseline's draw: a new configuration and a PCT schedule over its built form.

    Not focused on what the receiver reads: that needs the configuration's replayed run, which for a
    configuration seen once cost a second execution per draw (most of the runs `Context.base` made)
    and pushed the parents' runs out of its LRU; measured per draw, the plain sampler hit the bugs of
    both deep sets as often as the focused one. The form is built through the emulator's form cache,
    so the execution that follows does not build it again."""
    from epfuzz.search.sampler import sample_schedule
    from epfuzz.sim.engine import FORMS, build_over

    scn = codec.decode(_random_bytes(rng), ctx.protocol, ctx.preset)   # a one-off: not through the cache
    ctx.running = scn            # the plug-in's sender runs in the build: where it loops or raises, this is the input
    config = with_schedule(scn, ())
    form = FORMS.get(scn, ctx.proto)
    base = build_over(form, config)  # its built form is the run's next
    ctx.running = None
    streams = form.arrived(config, ()).streams       # the QP streams of `base`'s TLPs, kept on their arrival
    return ctx.emit(with_schedule(scn, sample_schedule(scn, ctx.proto, rng, base=base, streams=streams)))


def extend(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    return _schedule(ctx, data, rng, extend=True)


def resample(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    return _schedule(ctx, data, rng, extend=False)


def shift(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    """Nudge one overtake's distance or index; an index at the codec's bound moves the other way."""
    from epfuzz.search.sampler import MAX_INDEX, encodable

    scn = ctx.decode(data)
    if not scn.schedule:
        return extend(ctx, data, rng)
    sched = list(scn.schedule)
    i = rng.randrange(len(sched))
    o = sched[i]
    if rng.random() < 0.5:
        step = rng.choice((-4, -2, -1, 1, 2, 4))
        sched[i] = dataclasses.replace(o, distance=max(1, min(64, o.distance + step)))
    else:
        step = rng.choice((-2, -1, 1, 2))
        index = o.index + step
        if not 0 <= index <= MAX_INDEX:
            index = o.index - step
        sched[i] = dataclasses.replace(o, index=encodable(index))
    return ctx.emit_schedule(data, scn, tuple(sched))


def _field_span(ctx: Context, data: bytes, rng: random.Random) -> tuple[int, int] | None:
    starts = ctx.bounds(data)
    if not starts:
        return None
    i = rng.randrange(len(starts))
    at = starts[i]
    return at, (starts[i + 1] if i + 1 < len(starts) else at + 2)


def redraw_field(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    span = _field_span(ctx, data, rng) if data else None
    if span is None:
        return byte_edit(data, ctx.max_len, rng)
    at, end = span
    return (data[:at] + rng.randbytes(max(1, end - at)) + data[end:])[:ctx.max_len]


def shrink(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    span = _field_span(ctx, data, rng) if data else None
    if span is None:
        return byte_edit(data, ctx.max_len, rng)
    at, end = span
    return (data[:at] + bytes(max(1, end - at)) + data[end:])[:ctx.max_len]


def suffix(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    span = _field_span(ctx, data, rng) if data else None
    if span is None:
        return byte_edit(data, ctx.max_len, rng)
    return (data[:span[0]] + rng.randbytes(rng.randrange(1, 64)))[:ctx.max_len]


def bytes_move(ctx: Context, data: bytes, rng: random.Random) -> bytes:
    return byte_edit(data, ctx.max_len, rng)


#: Base weights from what each move found (2026-12-03, the guided engine with the earlier weights, 132 trials
#: over ten bugs of both deep sets: deep_flag_write, deep_gdr, deep_remainder_flag, deep_other_qp,
#: deep_notify_qp, deep_imm_other_qp, deep2_mid_stamp, deep2_notify, deep2_packed, deep2_spin_qp; finds per
#: thousand draws): extend 3.2, fresh+pct 1.1, fresh 1.1, resample 0.9, suffix 0.9, shift 0.4, field 0.3,
#: bytes 0.3, shrink 0 (71 of the 130 finds were extend's, on 22% of the draws). The adaptive weights
#: (MoveSet) start here.
DEFAULT: tuple[Move, ...] = (
    Move("fresh", "fresh", 2, fresh, "random bytes through the decoder"),
    Move("fresh+pct", "fresh", 4, fresh_pct, "a random configuration with a sampled schedule"),
    Move("extend", "schedule", 10, extend, "1-2 more change points on the parent's schedule"),
    Move("resample", "schedule", 2, resample, "a new sampled schedule for the parent's configuration"),
    Move("shift", "schedule", 1, shift, "one overtake's index or distance nudged"),
    Move("field", "ir", 1, redraw_field, "one decoder draw redrawn"),
    Move("shrink", "ir", 0.5, shrink, "one decoder draw set to its simplest value"),
    Move("suffix", "ir", 1, suffix, "every draw after one redrawn"),
    Move("bytes", "bytes", 0.5, bytes_move, "libFuzzer-style byte edits"),
)


PERIOD = 256       # draws between re-weighings of the moves (MOpt's "pilot" period)
SPREAD = 4.0       # a move's weight stays within [base / SPREAD, base * SPREAD]


class MoveSet:
    """Moves and their weights, drawn by one RNG; `sim=False` leaves out the schedule moves.

    `adapt=True` (the guided engine) moves the weights toward what pays, as MOpt does for AFL's
    mutation operators: every `PERIOD` draws a move's weight becomes its base weight times its
    yield (inputs kept or findings, per draw, over the whole set's yield), held within `SPREAD` of
    the base so no move dies out; the counts then halve, so the weights follow the run's phase.
    Where the bug is shallow (or the feedback has nothing to say about it) fresh inputs are kept
    at a higher rate than mutants and get more draws: guided stays near the sampler and random
    there; where mutants of kept inputs pay, they take the draws.
    """

    def __init__(self, moves: Sequence[Move] = DEFAULT, sim: bool = True, adapt: bool = False) -> None:
        self.moves = [m for m in moves if sim or m.kind != "schedule"]
        if not self.moves:
            from epfuzz.infra.errors import InputError

            raise InputError("no moves to draw from")
        self.by_name = {m.name: m for m in self.moves}
        self._index = {m.name: i for i, m in enumerate(self.moves)}
        self._weights = [m.weight for m in self.moves]
        self._fresh = [m for m in self.moves if m.kind == "fresh"]
        self._cum: tuple[list[float], list[float]] = ([], [])
        self._accumulate()
        self.adapt = adapt
        self.draws = [0.0] * len(self.moves)
        self.paid = [0.0] * len(self.moves)
        self._since = 0

    @property
    def weights(self) -> dict[str, float]:
        return {m.name: w for m, w in zip(self.moves, self._weights)}

    def _accumulate(self) -> None:
        """The cumulative weights `draw` hands to `random.choices`, made when the weights change: `choices`
        makes exactly these from `weights` on every call (list(accumulate(weights))), so the draws are the same."""
        w = self._weights
        self._cum = (list(accumulate(w)), list(accumulate(w[self._index[m.name]] for m in self._fresh)))

    def draw(self, rng: random.Random, have_parent: bool = True) -> Move:
        if not have_parent and self._fresh:
            return rng.choices(self._fresh, cum_weights=self._cum[1])[0]
        return rng.choices(self.moves, cum_weights=self._cum[0])[0]

    def reward(self, name: str, paid: bool) -> None:
        """What the drawn move's input did: `paid` if it was kept or found something."""
        i = self._index.get(name)
        if i is None or not self.adapt:
            return
        self.draws[i] += 1
        self.paid[i] += paid
        self._since += 1
        if self._since >= PERIOD:
            self._reweigh()

    def _reweigh(self) -> None:
        self._since = 0
        total = (sum(self.paid) + 1) / (sum(self.draws) + 1)
        for i, m in enumerate(self.moves):
            rate = (self.paid[i] + total) / (self.draws[i] + 1)    # a move barely drawn stays near the mean
            self._weights[i] = m.weight * max(1 / SPREAD, min(SPREAD, rate / total))
            self.draws[i] /= 2
            self.paid[i] /= 2
        self._accumulate()


def load(specs: Iterable[str]) -> list[Move]:
    """The moves `--moves module:attr` names (a Move, or a list/tuple of them), imported because named."""
    from epfuzz.infra.errors import InputError
    from epfuzz.search.plugins import load_object

    out: list[Move] = []
    for spec in specs:
        obj = load_object(spec, "--moves")
        for it in list(obj) if isinstance(obj, (list, tuple)) else [obj]:
            if not isinstance(it, Move):
                raise InputError(f"--moves {spec}: {it!r} is no epfuzz.search.moves.Move")
            out.append(it)
    return out
