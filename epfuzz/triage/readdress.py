"""Overtakes carried across a change of shape: the same TLP (or packet) moves, not the same index.

An overtake's `index` counts the run's TLPs (or packets) in arrival order, modulo their number.
Fewer tokens, channels or epochs renumber them, so after such a shrink the index names another
TLP and the finding is gone, though the bug survives the smaller shape: the minimizer then kept
33 tokens, 6 channels or a fourth epoch the bug does not need (issues 26.2 and 34.4; one such case
had one overtake at index 18536 and 179 TLPs where 2 TLPs suffice).

A unit's identity here is what it is, not where it stands: the region it writes, its action and
whether it is a receiver-local store; then its place: its epoch, which token it belongs to among
the tokens of that identity, and which piece of that token it is, each counted from the front or
the back ("the signal after the last token" stays that when tokens go; "the second half of the
first token" stays that when channels go). `readdress` maps each overtake of one scenario onto
another's units by one of the two counts; the minimizer tries a shape shrink with the schedule as
it is first, then with either re-addressing.
"""

from __future__ import annotations

from collections.abc import Sequence

from epfuzz.infra.errors import EpfuzzError
from epfuzz.ir.scenario import Overtake, Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.sim.engine import SimRun, build

Key = tuple[object, ...]
#: how a unit's place is counted within its identity: (which token, which piece of it), each from the
#: front or the back; the first names "the signal after the last token", the second "the first TLP"
VARIANTS = (("back", "back"), ("front", "front"), ("front", "back"), ("back", "front"))


def unit_keys(run: SimRun, stage: str) -> list[tuple[Key, tuple[int, int]]]:
    """Each unit's identity, and its epoch and the receive slot it writes (-1 outside the data region), in the order
    an overtake's index counts them: packets before adaptive routing moves them (their seq order),
    TLPs as they arrive at the root complex."""
    tb = max(1, run.layout.token_bytes)
    if stage == "net":
        return [((p.region, int(p.kind), 0), (p.epoch, p.off // tb if p.region == "data" else -1))
                for p in sorted(run.packets, key=lambda p: p.seq)]
    out: list[tuple[Key, tuple[int, int]]] = []
    for t in run.tlps:
        for k in range(t.n):
            off = t.off if k == 0 else (t.off // t.mps + k) * t.mps
            out.append(((t.region, int(t.action), int(t.local)), (t.epoch, off // tb if t.region == "data" else -1)))
    return out


def _rank(items: Sequence[object], way: str) -> dict[object, int]:
    firsts = list(dict.fromkeys(items))
    return {x: (i if way == "front" else len(firsts) - 1 - i) for i, x in enumerate(firsts)}


def _ranked(units: Sequence[tuple[Key, tuple[int, int]]], variant: tuple[str, str]) -> list[Key]:
    """Each unit's identity with its place appended: the rank of its epoch, then of its token among
    the tokens of that identity in the epoch (both counted the first way), then its rank among that
    token's units (the second way; a unit outside the data region: among the epoch's)."""
    by_group: dict[Key, list[int]] = {}
    for i, (g, _) in enumerate(units):
        by_group.setdefault(g, []).append(i)
    out: list[Key] = [()] * len(units)
    for g, idx in by_group.items():
        epochs = _rank([units[i][1][0] for i in idx], variant[0])
        per_epoch: dict[int, list[int]] = {}
        for i in idx:
            per_epoch.setdefault(units[i][1][0], []).append(i)
        for e, in_epoch in per_epoch.items():
            tokens = _rank([units[i][1][1] for i in in_epoch], variant[0])
            pieces: dict[int, list[int]] = {}
            for i in in_epoch:
                pieces.setdefault(units[i][1][1], []).append(i)
            for tok, members in pieces.items():
                place = _rank(members, variant[1])
                for i in members:
                    out[i] = (*g, epochs[e], tokens[tok], place[i])
    return out


def _mapped(moves: Sequence[Overtake], old: list[tuple[Key, tuple[int, int]]], new: list[tuple[Key, tuple[int, int]]],
            variant: tuple[str, str]) -> list[Overtake] | None:
    if not old or not new:
        return None
    where = {k: i for i, k in enumerate(_ranked(new, variant))}
    ranked = _ranked(old, variant)
    out = []
    for o in moves:
        i = where.get(ranked[o.index % len(old)])
        if i is None:
            return None
        out.append(Overtake(o.stage, i, o.distance))
    return out


def readdress(old: SimRun, new: Scenario, proto: Protocol, variant: tuple[str, str]) -> Scenario | None:
    """`new` with each of `old`'s overtakes pointed at the unit of the same identity in `new`'s run
    (ranked as `variant` says), or None where some unit has no counterpart there. Net moves
    come first: with adaptive routing on they decide the order TLPs reach the root complex in."""
    sched = old.scenario.schedule
    if not sched:
        return None
    try:
        first = build(new, proto)
        net = _mapped([o for o in sched if o.stage == "net"], unit_keys(old, "net"), unit_keys(first, "net"),
                      variant) if any(o.stage == "net" for o in sched) else []
        if net is None:
            return None
        it = iter(net)
        staged = new.replace(schedule=tuple(next(it) if o.stage == "net" else o for o in sched))
        second = build(staged, proto) if net and new.knobs.adaptive_routing else first
        pcie = _mapped([o for o in sched if o.stage == "pcie"], unit_keys(old, "pcie"), unit_keys(second, "pcie"),
                       variant) if any(o.stage == "pcie" for o in sched) else []
    except EpfuzzError:  # the new shape is not a scenario the protocol can post: nothing to map onto
        return None
    if pcie is None:
        return None
    it = iter(pcie)
    return staged.replace(schedule=tuple(next(it) if o.stage == "pcie" else o for o in staged.schedule))


def canonical_index(run: SimRun, o: Overtake) -> int:
    """The smallest index that names the same unit as `o.index` in this run (it is taken modulo the
    count): the same scenario, with a simpler schedule."""
    n = len(unit_keys(run, o.stage))
    return o.index % n if n else o.index
