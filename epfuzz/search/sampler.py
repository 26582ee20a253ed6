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
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Overtake, Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.search.featcore import marked_tlps  # the loop of `_marked` (compiled)
from epfuzz.search.schedcore import position as _position  # index of a unit in an order (compiled)
from epfuzz.sim.adversary import QpStreams, apply_overtakes, apply_tlp_overtakes
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
    polls = getattr(run, "polls", None)
    if not polls:
        return [t for t in run.tlps if t.action not in _DATA]
    return marked_tlps(run) or [t for t in run.tlps if t.action not in _DATA]


class _Orders:
    """The order each stage's overtakes so far make over a run's events, kept up to date as change points
    are added. `apply_overtakes` applies its moves one after another and carries nothing from one to the
    next but the order itself (the unit count, the pass rule, the window and the QP streams are those of the
    arrival order), so one more move applied to the order the earlier ones made is the order all of them make
    over arrival order: each change point costs one move, not the whole schedule again (an `extend` of a
    parent with 14 overtakes replayed all 14 per change point). The order of a schedule's kept overtakes is
    kept across calls (`_KEPT`): a parent picked again is extended from the same order."""

    def __init__(self, run: Any, scn: Scenario, moves: dict[str, list[tuple[int, int]]],
                 streams: Callable[[int], QpStreams] | None = None) -> None:
        self.run, self.moves, self.streams = run, moves, streams
        self.window = scn.knobs.reorder_window
        self.orders: dict[str, tuple[int, list[Any]]] = {}    # stage -> (moves applied, the order they make)

    def order(self, stage: str) -> list[Any]:
        """The order the stage's moves so far make."""
        moves = self.moves[stage]
        done, order = self.orders.get(stage) or (0, None)
        if order is None:
            order = _kept_order(self.run, stage, moves, self.window, self.streams)
        elif done < len(moves):
            order = _apply(self.run, stage, order, moves[done:], self.window, self.streams)
        self.orders[stage] = (len(moves), order)
        return order


def _apply(run: Any, stage: str, items: Sequence[Any], moves: Sequence[tuple[int, int]], window: int,
           streams: Callable[[int], QpStreams] | None = None) -> list[Any]:
    if stage == "net":
        return apply_overtakes(items, moves, packet_pass_rule(True), NET_WINDOW)[0]
    qp = streams(window) if streams is not None else _streams(run.tlps, window)
    return apply_tlp_overtakes(items, moves, tlp_pass_rule(), window, qp)[0]


#: (id of the events, stage, window, moves) -> (events, their order): the orders of kept schedules, least recently
#: used out (the events are held, so an id is never another list's while its entry lives)
_KEPT: OrderedDict[tuple[int, str, int, tuple[tuple[int, int], ...]], tuple[Any, list[Any]]] = OrderedDict()
KEPT_ORDERS = 64


def _kept_order(run: Any, stage: str, moves: Sequence[tuple[int, int]], window: int,
                streams: Callable[[int], QpStreams] | None = None) -> list[Any]:
    events = run.packets if stage == "net" else run.tlps
    if not moves:
        return list(events)
    key = (id(events), stage, window, tuple(moves))
    hit = _KEPT.get(key)
    if hit is not None and hit[0] is events:
        _KEPT.move_to_end(key)
        return hit[1]
    order = _apply(run, stage, events, moves, window, streams)
    _KEPT[key] = (events, order)
    if len(_KEPT) > KEPT_ORDERS:
        _KEPT.popitem(last=False)
    return order


#: the last (TLPs, window, QpStreams) made: a schedule's change points, and the moves on one parent, share them
_STREAMS: list[Any] = [None, 0, None]


def _streams(tlps: list[Any], window: int) -> QpStreams:
    last = _STREAMS
    if last[0] is tlps and last[1] == window:
        s: QpStreams = last[2]
        return s
    s = QpStreams(tlps, window)
    last[:] = [tlps, window, s]
    return s


def _change_point(run: Any, scn: Scenario, moves: dict[str, list[tuple[int, int]]], rng: random.Random,
                  focus: bool = False, marks: Callable[[], list[Any]] | None = None,
                  orders: _Orders | None = None) -> Overtake | None:
    """One change point over the order that `moves` (the schedule so far, per stage) already made.

    `focus` (the guided loop's move): half the time the event is one of the `_marked` runs (what the
    receiver watches and reads) and the unit its first or last one, so a signal or the edge of a read
    range is one draw in tens, not in hundreds. `marks` returns them where the caller keeps them (the
    guided engine, per configuration); `orders` carries the stages' orders from one change point to the next.
    """
    net = scn.knobs.adaptive_routing and len(run.packets) > 1
    stage = "net" if net and rng.random() < 0.5 else "pcie"
    events = run.packets if stage == "net" else run.tlps
    if not events:
        return None
    marked = (marks or (lambda: _marked(run)))() if focus and stage == "pcie" and rng.random() < 0.5 else []
    if marked:
        ev = rng.choice(marked)
        unit = ev.seq + ev.n - 1 if ev.n == 1 or rng.random() < 0.5 else ev.seq
    else:
        unit = _pick_unit(rng.choice(events), rng)
    order = (orders or _Orders(run, scn, moves)).order(stage)
    index = encodable(_position(order, unit))
    distance = min(64, 1 << rng.randrange(7)) if rng.random() < 0.5 else rng.randint(1, 64)
    moves[stage].append((index, distance))
    return Overtake(stage, index, distance)


def sample_schedule(scn: Scenario, proto: Protocol, rng: random.Random, depth: int | None = None,
                    keep: Sequence[Overtake] = (), focus: bool = False, base: Any = None,
                    marks: Callable[[], list[Any]] | None = None,
                    streams: Callable[[int], QpStreams] | None = None) -> tuple[Overtake, ...]:
    """d change points (1..MAX_DEPTH) over the scenario's arrival order, after the overtakes in `keep`.

    With `keep` (a kept input's schedule) this is a PCT move that adds to what came close
    instead of starting over: a depth-2 bug whose first reordering an input already makes
    needs one more change point, not two. `base`: the scenario's run without a schedule, if the
    caller keeps one (the guided loop mutates the same configuration many times); `marks`: what
    `_marked` returns for it, if the caller keeps that too; `streams(window)`: the `QpStreams` of its TLPs,
    where the caller has them (`Arrived.streams` of the built form: the executions over it use the same).
    """
    run = base if base is not None else build(scn.replace(schedule=()), proto)
    d = depth or rng.randint(1, MAX_DEPTH)
    moves: dict[str, list[tuple[int, int]]] = {"pcie": [], "net": []}
    for kept in keep:
        moves.setdefault(kept.stage, []).append((kept.index, kept.distance))
    if marks is None:
        memo: list[list[Any]] = []

        def marks() -> list[Any]:
            if not memo:
                memo.append(_marked(run))
            return memo[0]
    orders = _Orders(run, scn, moves, streams)
    out: list[Overtake] = list(keep)
    for _ in range(d):
        o = _change_point(run, scn, moves, rng, focus, marks, orders)
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
