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
Adaptive routing is the one platform knob the proof does not hold at the case's value: where the case
has it off and neither the preset nor the protocol pins it, a campaign under that preset draws it (the
same campaign's second bug was a repair's own form under adaptive routing: a flag WRITE moved onto the
data QP, whose packet may still arrive before the data's), so each scenario is explored again with it
on and the campaign draws it too. A scenario explore cannot decide (over its state budget or size
limits) makes the repair "not proven", with that bound; where only scenarios with adaptive routing on
are undecided (a handful of packets per epoch already exceeds what explore enumerates), the repair is
"proven, adaptive routing in part", with how many of those scenarios were undecided (`Proof.status_text`).
Undecided scenarios are grouped by why, each group with its remedy (`undecided_groups`). A reachable
scenario, or a campaign finding, refutes it. Nothing is claimed outside the scenarios checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from epfuzz.encoding import codec
from epfuzz.infra.errors import EpfuzzError, InputError
from epfuzz.ir.presets import get_preset
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
AR = "knobs.adaptive_routing"
AR_SUFFIX = " with adaptive routing on"   # the label of a scenario the proof turned adaptive routing on in
#: the status of a repair decided everywhere but in some (maybe all) scenarios with adaptive routing on; how
#: many is `Proof.status_text`'s
PROVEN_AR_IN_PART = "proven, adaptive routing in part"
#: statuses of a surviving repair, strongest first
STATUSES = ("proven", PROVEN_AR_IN_PART, "not proven")


@dataclass
class Check:
    """One scenario explored on the repaired protocol."""

    label: str
    scenario: Scenario
    verdict: str          # "unreachable", "reachable" or "undecided"
    states: int = 0
    detail: str = ""      # the violation (reachable) or the bound (undecided)
    adaptive: bool = False  # a scenario of the case's shape with adaptive routing turned on by the proof


@dataclass
class Proof:
    checks: list[Check] = field(default_factory=list)
    campaign_execs: int = 0
    campaign_finding: str = ""
    bounds: list[str] = field(default_factory=list)   # what the proof held fixed (`held_fixed`)
    #: "" where the proof explored adaptive routing on as well, else why it did not (`ar_held`)
    ar_held: str = ""
    #: where it explored it on as well: what it did, in place of explore's adaptive-routing bound (`held_fixed`)
    ar_explored: str = ""
    #: scenarios (labels) adaptive routing could not be turned on in, though the proof explores it (`with_ar`)
    ar_missing: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.campaign_finding or any(c.verdict == "reachable" for c in self.checks):
            return "refuted"
        undecided = [c for c in self.checks if c.verdict == "undecided"]
        if not undecided:
            return "proven"
        return PROVEN_AR_IN_PART if all(c.adaptive for c in undecided) else "not proven"

    @property
    def status_text(self) -> str:
        """The status, with how many scenarios with adaptive routing on were undecided where that qualifies it."""
        if self.status != PROVEN_AR_IN_PART:
            return self.status
        ar = [c for c in self.checks if c.adaptive]
        return f"{self.status}: {sum(c.verdict == 'undecided' for c in ar)} of {len(ar)} scenarios with it on undecided"

    @property
    def refuted_on(self) -> tuple[str, str]:
        """(where the proof failed: a scenario's label or "the guided campaign", the violation); ("", "") if not."""
        hit = next((c for c in self.checks if c.verdict == "reachable"), None)
        if hit is not None:
            return hit.label, hit.detail
        return ("the guided campaign", self.campaign_finding) if self.campaign_finding else ("", "")

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


def ar_held(scn: Scenario, proto: Repaired) -> str:
    """Why the proof holds adaptive routing at the case's value ("" where it explores it on as well): the case
    has it on already (every packet order is explored), or the preset or the protocol pins it off."""
    if scn.knobs.adaptive_routing:
        return "on in the case"
    if AR in get_preset(scn.preset).fixed:
        return f"off, pinned by the preset {scn.preset}"
    if AR in proto.fixed:
        return "off, pinned by the protocol"
    return "" if with_ar(scn) is not None else "off: the case's fields allow no adaptive routing"


def with_ar(scn: Scenario) -> Scenario | None:
    """`scn` with adaptive routing on, or None where that makes no valid scenario or the reload leaves it off
    (a pin of the scenario's own protocol or preset)."""
    try:
        on = codec.load_dict(scn.replace(schedule=()).with_path(AR, True).to_dict())
    except EpfuzzError:
        return None
    return on if on.knobs.adaptive_routing else None


SIZE = "<size>"  # the remedy of a size limit no option raises (`undecided_groups` says which)
#: explore's messages for the scenarios it cannot decide: (a fragment of the message, why, the remedy)
UNDECIDED = (
    ("too many to enumerate adaptive-routing orders",
     "more packets an epoch than explore enumerates with adaptive routing on (limit {limit})", SIZE),
    ("exceeded its state budget", "over the state budget ({states:,} states)", "raise --max-states"),
    ("too large to explore", "more TLPs an epoch than explore enumerates", SIZE),
)


def undecided_groups(proof: Proof) -> list[tuple[str, str, list[str]]]:
    """The scenarios explore could not decide, grouped by why: (why, the remedy, their labels). A packet or TLP
    limit has no option to raise: where the case itself is over it, a smaller case is the remedy (epfuzz
    minimize); where only neighbours are, none is (a minimal case's neighbours may be over it too)."""
    from epfuzz.sim.explore import MAX_AR_PACKETS

    groups: dict[tuple[str, str], list[str]] = {}
    for c in proof.checks:
        if c.verdict != "undecided":
            continue
        why, remedy = next(((w.format(states=c.states, limit=MAX_AR_PACKETS), r)
                            for frag, w, r in UNDECIDED if frag in c.detail), (c.detail, "none known"))
        groups.setdefault((why, remedy), []).append(c.label)
    out = []
    for (why, remedy), labels in groups.items():
        if remedy == SIZE:
            case_over = any(lab.removesuffix(AR_SUFFIX) == "the case" for lab in labels)
            remedy = ("a smaller case (epfuzz minimize CASE -o SMALL.json)" if case_over
                      else "none: the case itself is within the limit, only neighbours larger than it are over it")
        out.append((why, remedy, labels))
    return out


def held_fixed(scn: Scenario, proto: Repaired, held: str, bounds: list[str]) -> tuple[list[str], str]:
    """(what the proof held fixed, what it did with adaptive routing where it explored it on too, else "").

    Held fixed: explore's bounds for the case (its adaptive-routing line saying why it was held) and the
    case's own platform knobs (a repair is for the platform of the finding), with the values the edits set
    (strict-window's MR) said as the edits' (`scn` is the case, not the repaired scenario)."""
    out, explored = [], ""
    for b in bounds:
        if b.startswith("adaptive_routing=") and not held:
            explored = ("off as in the case, and on: each scenario explored again with every packet order per "
                        "epoch (the campaign draws it too)")
            continue
        if b.startswith("adaptive_routing=off"):
            b = f"adaptive_routing={held}: " + b.split(": ", 1)[1]
        out.append(b)
    k = scn.knobs
    line = (f"the case's platform: mr_relaxed={k.mr_relaxed}, nic_relaxed_ordering={k.nic_relaxed_ordering}, "
            f"atomic_mode={k.atomic_mode}, hca_o920={k.hca_o920}, ido={k.ido}")
    sets = [f"{e.name} sets {path.split('.', 1)[1]}={value}" for e in proto.edits for path, value in e.scenario.items()
            if path.startswith("knobs.") and scn.get_path(path) != value]
    out.append(line + "".join(f"; {s}" for s in sets))
    return out, explored


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


def campaign(scn: Scenario, proto: Repaired, seeds: list[Scenario], execs: int, seed: int = 0,
             ar: bool = False) -> tuple[str, int]:
    """The guided engine on the repaired protocol for `execs` executions: (the first finding's summary, or "",
    executions run). `ar`: adaptive routing as each input draws it, not the case's."""
    from epfuzz.search.engines.guided import Guided
    from epfuzz.sim.engine import SimRun, simulate

    def execute(s: Scenario, p: object) -> SimRun:  # the case's platform and signal, any shape and schedule
        here = s.replace(knobs=scn.knobs, signal=scn.signal)
        if ar:
            here = here.with_path(AR, s.knobs.adaptive_routing)
        return simulate(proto.scenario(here), proto)

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
    """Explore the case, then its neighbours (each again with adaptive routing on, where `ar_held` says
    the proof explores it), then run the campaign; with `stop_early`, stop at the first refutation (the
    search only needs to know that a candidate fails)."""
    from epfuzz.sim.explore import bounds

    held = ar_held(scn, proto)
    fixed, explored = held_fixed(scn, proto, held, bounds(proto.scenario(scn)))  # explored with the edits' pins
    proof = Proof(bounds=fixed, ar_held=held, ar_explored=explored)
    todo: list[tuple[str, Scenario, bool]] = []
    for label, s in [("the case", scn), *neighbours(scn)]:
        todo.append((label, s, False))
        if held:
            continue
        on = with_ar(s)
        if on is None:
            proof.ar_missing.append(label)
        else:
            todo.append((label + AR_SUFFIX, on, True))
    for label, s, adaptive in todo:
        proof.checks.append(check(label, s, proto, max_states))
        proof.checks[-1].adaptive = adaptive
        if stop_early and proof.status == "refuted":
            return proof
    if campaign_execs:
        seeds = [scn.replace(schedule=()), *(s for _, s, _ in todo[1:])]
        proof.campaign_finding, proof.campaign_execs = campaign(scn, proto, seeds, campaign_execs, ar=not held)
    return proof
