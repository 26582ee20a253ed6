"""Smallest-first search for repairs: every applicable edit alone, then pairs, ... up to `max_edits`.

An edit applies to a case when it changes what the protocol does there (`wrap.observable`), or the
platform field it pins; a combination is skipped when one of its edits changes nothing beside the
others, or when it contains a repair already proven (only minimal repairs are reported; one that only a
weaker status holds for leaves its supersets to be tried, as they may be proven outright). Each
candidate is first explored on the case alone (the cheap refutation), then given the full proof
(`epfuzz.repair.proof.prove`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from epfuzz.infra.errors import InputError
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.repair.catalogue import Edit, catalogue
from epfuzz.repair.proof import CAMPAIGN_EXECS, MAX_STATES, STATUSES, Proof, check, prove
from epfuzz.repair.wrap import Repaired, observable


@dataclass
class Candidate:
    edits: tuple[Edit, ...]
    proof: Proof
    extra_ops: int = 0      # ops added over every channel and epoch of the case
    round_trips: int = 0    # of them, Flushes: each waits for an ACK

    @property
    def names(self) -> str:
        return " + ".join(e.name for e in self.edits)

    def cost(self) -> str:
        ops_text = f"{self.extra_ops:+d} ops" + (f" ({self.round_trips} round trips)" if self.round_trips else "")
        return f"{ops_text}; " + "; ".join(e.cost for e in self.edits)


@dataclass
class RepairReport:
    case: Scenario
    protocol: str
    finding: str                       # the case's violation ("" when there is nothing to repair)
    method: str                        # how the finding was established
    applicable: list[str] = field(default_factory=list)
    repairs: list[Candidate] = field(default_factory=list)    # not refuted (proof.STATUSES), minimal
    refuted: list[Candidate] = field(default_factory=list)
    max_edits: int = 1
    seconds: float = 0.0

    @property
    def nothing_to_repair(self) -> bool:
        return not self.finding


def _cost(scn: Scenario, base: Protocol, rep: Repaired) -> tuple[int, int]:
    """(ops added, Flushes added) on the case, over every channel and epoch."""
    lay = base.layout(scn)
    added = flushes = 0
    for e in range(scn.payload.epochs):
        before = [op for prog in base.sender(scn, lay, e) for op in prog]
        after = [op for prog in rep.sender(rep.scenario(scn), lay, e) for op in prog]
        added += len(after) - len(before)
        flushes += sum(isinstance(op, ops.Flush) for op in after) - sum(isinstance(op, ops.Flush) for op in before)
    return added, flushes


def _effect(scn: Scenario, proto: Protocol) -> tuple[Any, ...]:
    s = proto.scenario(scn) if isinstance(proto, Repaired) else scn
    return (s.digest(), observable(s, proto))


def applicable(scn: Scenario, proto: Protocol, only: list[str] | None = None) -> list[Edit]:
    """The catalogue's edits that change something on the case (all of `only`, by name, when given)."""
    cat = catalogue(proto)
    if only is not None:
        names = {e.name: e for e in cat}
        missing = [n for n in only if n not in names]
        if missing:
            raise InputError(f"unknown edit(s) {', '.join(missing)}; the catalogue: {', '.join(names)}")
        return [names[n] for n in only]
    here = _effect(scn, proto)
    out = []
    for e in cat:
        if e.relevant is not None and not e.relevant(scn, proto):
            continue
        try:
            if _effect(scn, Repaired(proto, [e])) != here:
                out.append(e)
        except (InputError, TypeError):  # the edit makes the scenario invalid, or the receiver refuses it
            continue
    return out


def finding(scn: Scenario, proto: Protocol, max_states: int) -> tuple[str, str]:
    """(the case's violation or "", how it was established): exhaustively, else the case's own schedule."""
    from epfuzz.sim.engine import simulate
    from epfuzz.sim.explore import explore

    try:
        res = explore(scn, proto, max_states=max_states)
        if res.violation is not None:
            return res.violation.summary(), "exhaustive"
        return "", "exhaustive"
    except InputError as e:
        v = simulate(scn, proto).violation
        return ("" if v is None else v.summary()), f"the case's own schedule (explore: {e})"


def _no_stronger(cand: Candidate, repairs: list[Candidate]) -> bool:
    """Whether a repair of a subset of `cand`'s edits already holds with a status as strong as `cand`'s."""
    rank = STATUSES.index(cand.proof.status)
    return any({e.name for e in r.edits} <= {e.name for e in cand.edits} and STATUSES.index(r.proof.status) <= rank
               for r in repairs)


def repair(scn: Scenario, proto: Protocol, max_edits: int = 1, only: list[str] | None = None,
           campaign_execs: int = CAMPAIGN_EXECS, max_states: int = MAX_STATES) -> RepairReport:
    """Every minimal set of at most `max_edits` catalogue edits that the proof does not refute.

    With `only`, exactly that set of edits is proved (the replay of a reported proof)."""
    t0 = time.perf_counter()
    what, method = finding(scn, proto, max_states)
    report = RepairReport(scn, proto.name, what, method, max_edits=max_edits)
    if not what and only is None:
        report.seconds = time.perf_counter() - t0
        return report
    edits = applicable(scn, proto, only)
    report.applicable = [e.name for e in edits]
    sizes = [len(edits)] if only is not None else range(1, max_edits + 1)
    effects: dict[tuple[str, ...], tuple[Any, ...]] = {(): _effect(scn, proto)}
    for k in sizes:
        for combo in combinations(edits, k):
            names = tuple(e.name for e in combo)
            if only is None and any({e.name for e in r.edits} <= set(names) for r in report.repairs
                                    if r.proof.status == "proven"):
                continue
            rep = Repaired(proto, combo)
            effects[names] = eff = _effect(scn, rep)
            if only is None and any(effects.get(tuple(n for n in names if n != drop)) == eff for drop in names):
                continue  # one of its edits changes nothing beside the others
            quick = check("the case", scn, rep, max_states)
            if quick.verdict == "reachable":
                report.refuted.append(Candidate(combo, Proof(checks=[quick])))
                continue
            proof = prove(scn, rep, campaign_execs, max_states)
            cand = Candidate(combo, proof, *_cost(scn, proto, rep))
            if proof.status == "refuted":
                report.refuted.append(cand)
            elif only is not None or not _no_stronger(cand, report.repairs):
                report.repairs.append(cand)
    report.repairs.sort(key=lambda c: (len(c.edits), STATUSES.index(c.proof.status), c.extra_ops))
    report.seconds = time.perf_counter() - t0
    return report
