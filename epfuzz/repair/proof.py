"""The proof a repair must pass: exhaustive exploration of the case and its neighbourhood, then a
bounded guided campaign, all on the repaired protocol.

`explore` decides, per scenario, whether any visibility order the rules allow accepts an
unfinished buffer (its bounds are stated with each answer). The neighbourhood is the case's
shape grown and shrunk one field at a time (`NEIGHBOURHOOD`): more and fewer tokens, larger and
smaller tokens, one more split and one more token per WR, one channel and one QP more and fewer,
one epoch more. A neighbour the protocol's pins or the field bounds forbid is skipped, and the
ones checked are listed. The campaign is the guided engine (`epfuzz.search.engines.guided`) seeded with the
case and its neighbours, on the case's platform and signal fields (`knobs.*`, `signal.*`: a
repair is for the platform the finding was on) with any shape, faults and schedule; it is
bounded in executions, never in seconds, so a proof replays exactly.
A scenario explore cannot decide (over its state budget or size limits) makes the repair
"not proven", with that bound; a reachable one, or a campaign finding, refutes it. Nothing is
claimed outside the scenarios checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from epfuzz.encoding import codec
from epfuzz.infra.errors import EpfuzzError, InputError
from epfuzz.ir.scenario import Scenario
from epfuzz.repair.wrap import Repaired

#: (label, dotted field, how it moves from the case's value)
NEIGHBOURHOOD: tuple[tuple[str, str, Callable[[int], int]], ...] = (
    ("tokens + 1", "payload.num_tokens", lambda v: v + 1),
    ("tokens x 2", "payload.num_tokens", lambda v: 2 * v),
    ("tokens - 1", "payload.num_tokens", lambda v: v - 1),
    ("hidden bytes x 2", "payload.hidden_bytes", lambda v: 2 * v),
    ("hidden bytes / 2", "payload.hidden_bytes", lambda v: v // 2),
    ("splits + 1", "chunking.splits_per_token", lambda v: v + 1),
    ("tokens per WR + 1", "chunking.tokens_per_wr", lambda v: v + 1),
    ("channels + 1", "topology.num_channels", lambda v: v + 1),
    ("channels - 1", "topology.num_channels", lambda v: v - 1),
    ("QPs + 1", "topology.num_qps", lambda v: v + 1),
    ("QPs - 1", "topology.num_qps", lambda v: v - 1),
    ("epochs + 1", "payload.epochs", lambda v: v + 1),
)
CAMPAIGN_EXECS = 2000
MAX_STATES = 200_000


@dataclass
class Check:
    """One scenario explored on the repaired protocol."""

    label: str
    scenario: Scenario
    verdict: str          # "unreachable", "reachable" or "undecided"
    states: int = 0
    detail: str = ""      # the violation (reachable) or the bound (undecided)


@dataclass
class Proof:
    checks: list[Check] = field(default_factory=list)
    campaign_execs: int = 0
    campaign_finding: str = ""
    bounds: list[str] = field(default_factory=list)   # what explore held fixed, for the case

    @property
    def status(self) -> str:
        if self.campaign_finding or any(c.verdict == "reachable" for c in self.checks):
            return "refuted"
        return "not proven" if any(c.verdict == "undecided" for c in self.checks) else "proven"

    @property
    def states(self) -> int:
        return sum(c.states for c in self.checks)

    def size(self) -> str:
        return (f"{len(self.checks)} scenarios explored ({self.states:,} states), "
                f"{self.campaign_execs:,} guided executions")


def neighbours(scn: Scenario) -> list[tuple[str, Scenario]]:
    """The case's shape moved along each `NEIGHBOURHOOD` axis, where the pins and bounds allow it.

    Changing the channel or QP count drops the explicit channel-to-QP map and cuts the per-QP
    fault lists to the new count: the neighbour uses the default mapping."""
    out: list[tuple[str, Scenario]] = []
    seen = {scn.digest()}
    for label, path, move in NEIGHBOURHOOD:
        value = move(scn.get_path(path))
        cand = scn.with_path(path, value)
        if path.startswith("topology."):
            nq = cand.topology.num_qps
            cand = cand.with_path("topology.channel_qp", ())
            cand = cand.with_path("faults.qp_delay_ns", cand.faults.qp_delay_ns[:nq])
            cand = cand.with_path("faults.qp_rate_div", cand.faults.qp_rate_div[:nq])
        try:
            cand = codec.load_dict(cand.replace(schedule=()).to_dict())
        except EpfuzzError:
            continue
        if cand.get_path(path) != value or cand.digest() in seen:  # pinned, clamped or the same as another
            continue
        seen.add(cand.digest())
        out.append((label, cand))
    return out


def check(label: str, scn: Scenario, proto: Repaired, max_states: int) -> Check:
    from epfuzz.sim.explore import explore

    s = proto.scenario(scn)
    try:
        res = explore(s, proto, max_states=max_states)
    except InputError as e:
        return Check(label, scn, "undecided", max_states, str(e))
    if res.violation is not None:
        return Check(label, scn, "reachable", res.states, res.violation.summary())
    return Check(label, scn, "unreachable", res.states)


def campaign(scn: Scenario, proto: Repaired, seeds: list[Scenario], execs: int, seed: int = 0) -> tuple[str, int]:
    """The guided engine on the repaired protocol for `execs` executions: (the first finding's summary, or "",
    executions run)."""
    from epfuzz.search.engines.guided import Guided
    from epfuzz.sim.engine import SimRun, simulate

    def execute(s: Scenario, p: object) -> SimRun:  # the case's platform and signal, any shape and schedule
        return simulate(proto.scenario(s.replace(knobs=scn.knobs, signal=scn.signal)), proto)

    g = Guided(scn.protocol, proto, seed, preset=scn.preset, execute=execute)
    done = 0
    for s in seeds[:execs]:
        step = g.try_input(codec.encode(s))
        done += 1
        if step.run.violation is not None:
            return f"{step.run.violation.summary()} (input {codec.encode(s).hex()})", done
    while done < execs:
        step = g.step()
        done += 1
        if step.run.violation is not None:
            return f"{step.run.violation.summary()} (input {step.data.hex()})", done
    return "", done


def prove(scn: Scenario, proto: Repaired, campaign_execs: int = CAMPAIGN_EXECS, max_states: int = MAX_STATES,
          stop_early: bool = True) -> Proof:
    """Explore the case, then its neighbours, then run the campaign; with `stop_early`, stop at the
    first refutation (the search only needs to know that a candidate fails)."""
    from epfuzz.sim.explore import bounds

    proof = Proof(bounds=bounds(proto.scenario(scn)))
    near = neighbours(scn)
    for label, s in [("the case", scn), *near]:
        proof.checks.append(check(label, s, proto, max_states))
        if stop_early and proof.status == "refuted":
            return proof
    if campaign_execs:
        proof.campaign_finding, proof.campaign_execs = campaign(
            scn, proto, [scn.replace(schedule=()), *(s for _, s in near)], campaign_execs)
    return proof
