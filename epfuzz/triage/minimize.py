"""Structure-aware minimization of a finding: 1-minimal, at the smallest shape the bug allows.

Like Hypothesis' shrinker it works on the IR, not the bytes, in named passes (`PASSES`) run to a
fixpoint, "simpler" defined once per field type (`simpler_values`):

- `remove_entries`: drop one entry of a list (an overtake, a spin, a per-QP delay);
- `shrink_shape`: sizes down (epochs, tokens, channels, QPs, bytes, chunking, delays), each
  candidate also tried with its overtakes re-addressed to the same TLPs (`epfuzz.readdress`: an
  index counts the run's TLPs, so a smaller shape pointed it elsewhere and the shrink failed, which
  left 33 tokens or 6 channels in "minimized" cases);
- `trade_ar`: adaptive routing off where the root complex can move the same WRs (`epfuzz.triage.trade`);
- `simplify_knobs`: ordering knobs and signal fields towards their first option;
- `simplify_schedule`: an overtake's index to the smallest that names the same TLP, then lower,
  its distance lower;
- `simplify_rest`: every other leaf (the GPU section), so no field is left out;
- `remove_pairs`: two entries of one list at once (an overtake, its undo and the overtake again
  shrink only so), tried only once no single step applies.

Each pass resumes at the field it last shrank instead of starting over, and the passes repeat
until a whole round changes nothing: then every candidate of the result was tried and failed,
so it is 1-minimal (`is_one_minimal`). Candidates go through the same JSON loader as any user
input, so the result is always a valid scenario.

The work is bounded in candidates tried (`max_runs`), never in seconds, so the result is a
function of the finding, whatever the load (issue 26). `max_seconds` exists for the interactive
`epfuzz minimize --max-seconds` on hardware only. On a nondeterministic backend each candidate is
run `repeats` times and kept if it reproduces in at least `threshold` of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from epfuzz.backends import Backend, Outcome, blind_spot, get_backend
from epfuzz.encoding import codec
from epfuzz.encoding.pins import fixed_fields
from epfuzz.infra.errors import EpfuzzError
from epfuzz.ir.scenario import Scenario, iter_leaf_fields
from epfuzz.protocols.base import Protocol
from epfuzz.triage.passes import PASSES, Ctx, Pass, candidates, remove_pairs, simpler_values

Predicate = Callable[[Scenario], bool]
__all__ = ["Minimized", "candidates", "is_one_minimal", "minimize", "reduce_knobs", "reproduces", "simpler_values",
           "too_large_to_explore"]
#: how explore's refusal of a case too large for its adaptive-routing orders begins its advice (epfuzz.sim.explore)
MINIMIZE_FIRST = ": minimize the case first"


@dataclass
class Minimized:
    original: Scenario
    result: Scenario
    runs: int
    seconds: float
    #: the run that verified `result`; on hardware a second run could disagree with it
    outcome: Outcome
    #: False when `max_runs`/`max_seconds`/`stop` ended the search: `result` is then the best so far,
    #: not checked to be 1-minimal
    complete: bool = True

    @property
    def rate(self) -> float:
        return self.outcome.rate

    def sizes(self) -> tuple[int, int]:
        return len(codec.encode(self.original)), len(codec.encode(self.result))


def _holds(out: Outcome, threshold: float, kind: str | None) -> bool:
    """The run shows the finding: a violation (of `kind`, when given) in `threshold` of its repeats."""
    return out.violation is not None and (not kind or out.violation.kind == kind) and out.rate >= threshold


def reproduces(backend: Backend, proto: Protocol, repeats: int, threshold: float, kind: str | None) -> Predicate:
    def pred(s: Scenario) -> bool:
        return _holds(backend.run(s, proto, repeats=repeats), threshold, kind)

    return pred


class _Search:
    """The fixpoint loop: the passes, a count of candidates tried, and what may end it early."""

    def __init__(self, scn: Scenario, proto: Protocol, pred: Predicate, max_runs: int,
                 max_seconds: float | None, stop: Callable[[], bool] | None) -> None:
        self.current, self.proto, self.pred = scn, proto, pred
        self.fixed = fixed_fields(scn.protocol, scn.preset)
        self.max_runs, self.stop = max_runs, stop
        self.deadline = None if max_seconds is None else time.perf_counter() + max_seconds
        self.runs = 0
        self.accepted = [scn]
        self.complete = True
        #: what the passes share about `current` (its build, its run), kept while it stays current: a round
        #: that changes nothing runs every pass over the same case
        self.ctx = Ctx(scn, proto, self.fixed)

    def _out_of_budget(self) -> bool:
        if (self.runs >= self.max_runs or (self.deadline is not None and time.perf_counter() > self.deadline)
                or (self.stop is not None and self.stop())):
            self.complete = False
        return not self.complete

    def run_pass(self, p: Pass) -> bool:
        """Shrink with one pass until it has nothing left; True if it changed the scenario."""
        changed, resume = False, 0
        while not self._out_of_budget():
            if self.ctx.scn is not self.current:
                self.ctx.scn = self.current
            for pos, cand in p(self.ctx):
                if pos < resume:
                    continue
                if self._out_of_budget():
                    return changed
                self.runs += 1
                if self.pred(cand):
                    self.current, resume, changed = cand, pos, True
                    self.accepted.append(cand)
                    break
            else:
                return changed
        return changed

    def search(self) -> None:
        while not self._out_of_budget():
            changed = False
            for p in PASSES:
                changed |= self.run_pass(p)
            if not changed and not self.run_pass(remove_pairs):
                return


def minimize(scn: Scenario, proto: Protocol, backend: str = "sim", repeats: int = 1, threshold: float = 0.5,
             predicate: Predicate | None = None, max_runs: int = 20000, max_seconds: float | None = None,
             stop: Callable[[], bool] | None = None) -> Minimized:
    """Shrink until 1-minimal, or until `max_runs` candidates, `max_seconds` or `stop()` (then: the
    best so far, `complete` False)."""
    b = get_backend(backend)
    if b.deterministic:
        repeats = 1
    first = b.run(scn, proto, repeats=repeats)
    if first.violation is None:  # where the backend cannot show the rule it needs, the line says so (run does too)
        note = blind_spot(b, scn)
        raise EpfuzzError(f"scenario {scn.digest()} does not reproduce a finding on {backend}; nothing to minimize"
                          + (f" ({note})" if note else ""))
    pred = predicate or reproduces(b, proto, repeats, threshold, first.violation.kind)
    t0 = time.perf_counter()
    s = _Search(scn, proto, pred, max_runs, max_seconds, stop)
    s.search()
    current = s.current
    out = b.run(current, proto, repeats=repeats)
    # a flaky reproduction can slip through once: on a nondeterministic backend, step back
    # through the accepted candidates until one reproduces again at the threshold
    while not b.deterministic and out.rate < threshold and len(s.accepted) > 1:
        s.accepted.pop()
        current = s.accepted[-1]
        out = b.run(current, proto, repeats=repeats)
    return Minimized(scn, current, s.runs, time.perf_counter() - t0, out, s.complete)


def too_large_to_explore(why: str, scn: Scenario, proto: Protocol) -> str:
    """explore's refusal `why`, whose advice to minimize the case first holds for a finding only: a clean case
    has nothing to minimize, and `minimize` refused the very case explore sent it to (trial 0205 item 3). A
    clean case is told its routes: a smaller scenario, or this one without adaptive routing where no pin keeps
    it on."""
    head, minimize_first, _ = why.partition(MINIMIZE_FIRST)
    if not minimize_first or get_backend("sim").run(scn, proto).violation is not None:
        return why
    ar_off = ("" if "knobs.adaptive_routing" in fixed_fields(scn.protocol, scn.preset) else
              ", or this one with knobs.adaptive_routing false (a proof for each QP's packets in order only)")
    return (f"{head}: the case is clean on the sim, so minimize has nothing to shrink: explore a smaller scenario "
            "(fewer payload.num_tokens, topology.num_channels or chunking.splits_per_token, or more "
            f"chunking.tokens_per_wr, make fewer packets; `epfuzz run CASE -v` prints its scenario JSON){ar_off}")


def reduce_knobs(scn: Scenario, proto: Protocol, backend: Backend, fields: tuple[str, ...], repeats: int = 5,
                 threshold: float = 0.4) -> tuple[Scenario, Outcome] | None:
    """Each of `fields` set to its simplest value where the finding survives it, one at a time in
    order, each value a few runs (bounded in runs, not seconds): (scenario, its outcome), or None
    when the finding does not
    reproduce at `threshold` to begin with. An integer field (a plug-in's `topology.num_qps`) goes to
    the smallest value it survives, not only to its simplest (one QP kills a cross-QP race; two keep
    it: seven QP counts were seven "bugs").

    What a summary groups findings by on a backend where full minimization costs too much (a verbs
    run is ~50 ms in the guest, a campaign's findings would need minutes): the root cause is made of
    these fields alone. A dropped value is one the finding was seen with (in 2 of 5 runs); one kept
    may only have been unlucky (a finding seen in 60% of runs passes 2 of 5 in 91% of tries), so a
    flaky finding can split into two groups, but two bugs never merge."""
    specs = dict(iter_leaf_fields())
    first = backend.run(scn, proto, repeats=repeats)
    if first.violation is None or not _holds(first, threshold, None):
        return None
    kind = first.violation.kind
    current, out = scn, first
    fixed = fixed_fields(scn.protocol, scn.preset)
    for path in fields:
        for value in simpler_values(specs[path], current.get_path(path)):
            got = _first_holding(Ctx(current, proto, fixed).changed(path, value),
                                 lambda c: backend.run(c, proto, repeats=repeats), threshold, kind)
            if got is not None:
                current, out = got
                break
    return current, out


def _first_holding(forms: list[Scenario], run: Callable[[Scenario], Outcome], threshold: float,
                   kind: str) -> tuple[Scenario, Outcome] | None:
    """The first of `forms` (one value set as the minimizer sets it: dependent fields renumbered,
    then cut to fit) that shows the finding, with its outcome. `with_path` alone left a channel's
    QP 6 with fewer QPs, no scenario, so a hardware cause kept the QP count it was found with."""
    for cand in forms:
        try:
            got = run(cand)
        except EpfuzzError:
            continue
        if _holds(got, threshold, kind):
            return cand, got
    return None


def is_one_minimal(scn: Scenario, predicate: Predicate, proto: Protocol | None = None) -> bool:
    return predicate(scn) and not any(predicate(c) for c in candidates(scn, proto))
