"""A PCT-style sampler for the adversary's overtake schedule.

Random bytes through the decoder give overtakes whose `index` is uniform over TLP
*units*: with DeepEP-sized slots and a 128-byte max payload a token is 59 units
and a signal is one, so the rare reorderings that deep bugs need (a signal or a
slot's trailer moving back past one particular TLP) are drawn about once in
hundreds of overtakes. PCT (Burckhardt et al., ASPLOS'10) samples the *events*
instead: the base schedule is arrival order, and d change points each take one
event out of its place. Here an event is a run of TLPs (one packet's payload, an
atomic, a CQE) or a packet; a change point picks one uniformly among them, then
its first or last unit (where a trailer or a tail sits) or one inside, and moves
it back a log-uniform distance. A depth-d bug is then hit with probability about
1/(events * 3 * 7)^d instead of 1/units^d, whatever the slot size.

Usable three ways: `sample_schedule` (a schedule for a decoded scenario),
`SamplerSearch` (the sampler alone as a baseline: fresh random configuration,
sampled schedule) and `mutate_schedule` (a custom-mutator move on fuzz bytes).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Overtake, Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.sim.adversary import QpStreams, apply_overtakes
from epfuzz.sim.engine import NET_WINDOW, build
from epfuzz.sim.packets import TlpAction
from epfuzz.sim.pass_rules import packet_pass_rule, tlp_pass_rule

MAX_DEPTH = 3
MAX_INDEX = 65535      # the codec's bound on Overtake.index


#: data TLPs: the payload, or what a stale DMA read of the send buffer carried in its place
_DATA = (TlpAction.COPY, TlpAction.STALE)


def encodable(index: int) -> int:
    """An overtake index the codec can write: a run longer than 65,536 units has units no index
    addresses (the index is taken modulo the run's length), so a position past it is held at it."""
    return max(0, min(MAX_INDEX, index))


def _position(order: Sequence[Any], unit: int) -> int:
    """Index of arrival unit `unit` in the current order, counted in units."""
    acc = 0
    for x in order:
        if x.seq <= unit < x.seq + x.n:
            return acc + unit - x.seq
        acc += x.n
    return 0


def _pick_unit(ev: Any, rng: random.Random) -> int:
    r = rng.randrange(3)
    if r == 0 or ev.n == 1:
        return ev.seq + ev.n - 1          # the last unit: a trailer, a tail, a signal
    if r == 1:
        return ev.seq
    return ev.seq + rng.randrange(ev.n)


def _marked(run: Any) -> list[Any]:
    """TLP runs the receiver hinges on, read off its own run (epfuzz.search.feedbacks.reads_of): the
    TLPs that woke an accepting poll and every TLP in a region they landed in (what it watches), and
    the data runs that hold the first or last bytes of a range it accepted, or of a slot in one (what
    it reads: a header, a trailer, a stamp). A run with no accepting poll (a configuration built
    without its replay) falls back to every non-data TLP."""
    from epfuzz.search.feedbacks import reads_of

    polls = getattr(run, "polls", None)
    if not polls:
        return [t for t in run.tlps if t.action not in _DATA]
    r = reads_of(run)
    tb = run.layout.token_bytes
    out = []
    for t in run.tlps:
        if t.local:
            continue
        if t.seq in r.triggers or t.region in r.watched:
            out.append(t)
            continue
        lo, hi = t.off, t.off + max(t.length, 1)
        for a, b in r.ranges.get((t.epoch, t.region), ()):
            if lo < b and a < hi and (lo <= a or hi >= b or (tb and ((lo - a) % tb == 0 or (hi - a) % tb == 0))):
                out.append(t)
                break
    return out or [t for t in run.tlps if t.action not in _DATA]


def _change_point(run: Any, scn: Scenario, moves: dict[str, list[tuple[int, int]]], rng: random.Random,
                  focus: bool = False) -> Overtake | None:
    """One change point over the order that `moves` (the schedule so far, per stage) already made.

    `focus` (the guided loop's move): half the time the event is one of the `_marked` runs (what the
    receiver watches and reads) and the unit its first or last one, so a signal or the edge of a read
    range is one draw in tens, not in hundreds.
    """
    net = scn.knobs.adaptive_routing and len(run.packets) > 1
    stage = "net" if net and rng.random() < 0.5 else "pcie"
    events = run.packets if stage == "net" else run.tlps
    if not events:
        return None
    marked = _marked(run) if focus and stage == "pcie" and rng.random() < 0.5 else []
    if marked:
        ev = rng.choice(marked)
        unit = ev.seq + ev.n - 1 if ev.n == 1 or rng.random() < 0.5 else ev.seq
    else:
        unit = _pick_unit(rng.choice(events), rng)
    if stage == "net":
        order, _ = apply_overtakes(events, moves["net"], packet_pass_rule(True), NET_WINDOW)
    else:
        window = scn.knobs.reorder_window
        order, _ = apply_overtakes(events, moves["pcie"], tlp_pass_rule(), window, QpStreams(events, window))
    index = encodable(_position(order, unit))
    distance = min(64, 1 << rng.randrange(7)) if rng.random() < 0.5 else rng.randint(1, 64)
    moves[stage].append((index, distance))
    return Overtake(stage, index, distance)


def sample_schedule(scn: Scenario, proto: Protocol, rng: random.Random, depth: int | None = None,
                    keep: Sequence[Overtake] = (), focus: bool = False, base: Any = None) -> tuple[Overtake, ...]:
    """d change points (1..MAX_DEPTH) over the scenario's arrival order, after the overtakes in `keep`.

    With `keep` (a kept input's schedule) this is a PCT move that adds to what came close
    instead of starting over: a depth-2 bug whose first reordering an input already makes
    needs one more change point, not two. `base`: the scenario's run without a schedule, if the
    caller keeps one (the guided loop mutates the same configuration many times).
    """
    run = base if base is not None else build(scn.replace(schedule=()), proto)
    d = depth or rng.randint(1, MAX_DEPTH)
    moves: dict[str, list[tuple[int, int]]] = {"pcie": [], "net": []}
    for kept in keep:
        moves.setdefault(kept.stage, []).append((kept.index, kept.distance))
    out: list[Overtake] = list(keep)
    for _ in range(d):
        o = _change_point(run, scn, moves, rng, focus)
        if o is None:
            break
        out.append(o)
    return tuple(out)


def mutate_schedule(data: bytes, protocol: str, proto: Protocol, rng: random.Random,
                    preset: str = "spec") -> bytes:
    """Custom-mutator move: keep the input's configuration, resample its schedule."""
    scn = codec.decode(data, protocol, preset)
    return codec.encode(scn.replace(schedule=sample_schedule(scn, proto, rng)))


class SamplerSearch:
    """The sampler alone: a random configuration through the decoder, a sampled schedule."""

    def __init__(self, protocol: str, proto: Protocol, seed: int, preset: str = "spec") -> None:
        self.protocol, self.proto, self.preset = protocol, proto, preset
        self.rng = random.Random(seed)

    def next_scenario(self) -> Scenario:
        data = self.rng.randbytes(self.rng.randrange(0, 129))
        scn = codec.decode(data, self.protocol, self.preset)
        return scn.replace(schedule=sample_schedule(scn, self.proto, self.rng))
