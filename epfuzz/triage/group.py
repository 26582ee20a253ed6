"""Raw findings grouped by root cause: the same bugs whatever the clock, the load or `--time`.

The second wave grouped by minimizing each finding within a share of wall time: on a busy
2-core machine 2 bugs became 57-86, and the count moved with `--time` (issue 26). Here every
bound is a count: candidates the minimizer may try for one finding (`PER_FINDING`) and steps for
the whole grouping (`MAX_STEPS`, candidates plus explorations). A finding the bounds (or a
signal) leave unfinished is not a bug: it is counted in `Grouping.left`, and the summary says so
in one line with the command that finishes it (`epfuzz triage RUN`).

What keeps it fast without a clock: the minimizer's passes shrink the shape first (cheap runs
after the first few), one memo of candidate verdicts serves every finding of the grouping (their
minimizations cross the same small scenarios), one of causes per minimized scenario, and the
cache across runs (`epfuzz.triage.cache`) answers findings grouped before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from epfuzz.backends import get_backend
from epfuzz.backends.base import Where
from epfuzz.cases.corpus import Case, load_case, write_atomic
from epfuzz.infra.diskspace import NoSpace
from epfuzz.infra.errors import EpfuzzError, InputError
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.triage.cache import CauseCache

#: candidates the minimizer may try for one finding (its default; a #661 finding needs 50-300)
PER_FINDING = 20_000
#: steps (candidates tried plus explorations) for a whole grouping
MAX_STEPS = 200_000
Progress = Callable[[int, int, int], None]   # (findings done, findings in all, bugs so far)


@dataclass
class Bug:
    """One root cause: how many raw findings share it, and one (minimized on sim) case to replay."""

    cause: str
    case: Path
    note: str
    minimized: bool
    raw: list[Path] = field(default_factory=list)
    #: on a nondeterministic backend: the runs a replay needs and the rate the case reproduced at
    repeats: int = 1
    rate: float = 1.0

    @property
    def count(self) -> int:
        return len(self.raw)


@dataclass
class Grouping:
    bugs: list[Bug]
    left: list[Path] = field(default_factory=list)   # raw findings not grouped (see `why`)
    why: str = ""
    steps: int = 0


@dataclass
class _Result:
    cause: str
    scenario: Scenario | None     # the case to write (None: the raw case itself)
    note: str
    minimized: bool
    repeats: int = 1
    rate: float = 1.0


class _Grouper:
    def __init__(self, out_dir: Path, backend: str, max_steps: int, per_finding: int,
                 stop: Callable[[], bool] | None, use_cache: bool) -> None:
        self.out_dir, self.backend = out_dir, backend
        self.max_steps, self.per_finding, self.stop = max_steps, per_finding, stop
        self.use_cache = use_cache
        self.steps = 0
        self.verdicts: dict[tuple[str, str], bool] = {}
        self.causes: dict[str, tuple[str, str]] = {}
        self.caches: dict[tuple[str, str], CauseCache] = {}
        #: protocols whose code ran past a per-call limit (epfuzz.protocols.limits) in a candidate: the reason
        self.over_limit: dict[str, str] = {}

    def _cache(self, scn: Scenario, proto: Protocol) -> CauseCache:
        key = (scn.protocol, scn.preset)
        if key not in self.caches:
            self.caches[key] = CauseCache(scn.protocol, scn.preset, self.backend, proto, self.use_cache)
        return self.caches[key]

    def _pred(self, proto: Protocol, kind: str) -> Callable[[Scenario], bool]:
        from epfuzz.triage.minimize import _holds

        b = get_backend(self.backend)

        def pred(s: Scenario) -> bool:
            key = (s.digest(), kind)
            if key not in self.verdicts:
                self.verdicts[key] = _holds(b.run(s, proto, repeats=1), 0.5, kind)
            return self.verdicts[key]

        return pred

    def sim_cause(self, scn: Scenario, proto: Protocol) -> _Result | str:
        """The cause of one raw finding on a deterministic backend, or why it was left."""
        from epfuzz.triage.cause import root_cause
        from epfuzz.triage.minimize import minimize

        cache = self._cache(scn, proto)
        hit = cache.get(scn.digest())
        if hit is not None:
            from epfuzz.encoding import codec
            return _Result(hit["cause"], codec.load_dict(hit["scenario"]), hit["note"], True)
        if self.stop is not None and self.stop():  # what the cache knows is still grouped, at no cost
            return "stopped by a signal"
        room = self.max_steps - self.steps
        if room <= 0:
            return f"the grouping's bound of {self.max_steps:,} steps was reached"
        first = get_backend(self.backend).run(scn, proto)
        if first.violation is None:
            raise EpfuzzError("does not reproduce")
        mz = minimize(scn, proto, backend=self.backend,
                      predicate=self._pred(proto, first.violation.kind),
                      max_runs=min(self.per_finding, room), stop=self.stop)
        self.steps += mz.runs
        if not mz.complete:
            if self.stop is not None and self.stop():
                return "stopped by a signal"
            if mz.runs >= self.per_finding:
                return f"a minimization did not end within {self.per_finding:,} candidates"
            return f"the grouping's bound of {self.max_steps:,} steps was reached"
        digest = mz.result.digest()
        if digest not in self.causes:
            b = get_backend(self.backend, require=False)
            cause, got = root_cause(mz.result, mz.outcome, proto, b.signature_fields(proto))
            self.steps += got.steps
            self.causes[digest] = (cause, mz.outcome.violation.summary() if mz.outcome.violation else "")
        cause, note = self.causes[digest]
        cache.put(scn.digest(), {"cause": cause, "scenario": mz.result.to_dict(), "note": note})
        return _Result(cause, mz.result, note, True)

    def hardware_cause(self, case: Case, proto: Protocol) -> _Result | None:
        """A nondeterministic backend that runs here (verbs in the guest, cuda on a GPU): full
        minimization would cost minutes of device time per finding, so only the signature's knobs
        are reduced (`minimize.reduce_knobs`, 5 runs a value), which is what the cause is made of."""
        from epfuzz.triage.cause import moved_knobs_cause
        from epfuzz.triage.minimize import reduce_knobs

        b = get_backend(self.backend, require=False)
        got = reduce_knobs(case.scenario, proto, b, b.signature_fields(proto))
        if got is None:  # does not reproduce in 2 of 5 runs now: it stays as it was found
            return None
        scn, outcome = got
        note = outcome.violation.summary() if outcome.violation else ""
        return _Result(moved_knobs_cause(scn, outcome, proto), scn, note,
                       False, repeat_count(outcome.rate), outcome.rate)

    def one(self, path: Path) -> _Result | str:
        from epfuzz.protocols import get_protocol, limits

        case = load_case(path)
        raw = _Result(case.signature, None, case.note, False)
        if self.backend == "raw":
            return raw
        proto = get_protocol(case.scenario.protocol)
        b = get_backend(self.backend, require=False)
        if case.scenario.protocol in self.over_limit and not self._cache(case.scenario, proto).get(
                case.scenario.digest()):
            return self.over_limit[case.scenario.protocol]
        try:
            if b.deterministic:
                return self.sim_cause(case.scenario, proto)
            if b.where() is Where.HERE:
                return self.hardware_cause(case, proto) or raw
        except EpfuzzError as e:  # does not reproduce here (another backend's case): keep it as it is
            if isinstance(e, InputError):
                raise
        except limits.OverLimit as e:  # a candidate made the plug-in's code loop or hog: its findings wait
            self.over_limit[case.scenario.protocol] = f"a candidate ran past a per-call limit ({e.kind})"
            return self.over_limit[case.scenario.protocol]
        return raw

    def write(self, r: _Result, path: Path) -> Path:
        from epfuzz.cases.corpus import file_stem
        from epfuzz.encoding import codec

        if r.scenario is None:
            return path
        name = f"{file_stem(r.scenario.protocol)}-{hashlib.sha1(r.cause.encode()).hexdigest()[:10]}"
        out = self.out_dir / f"{name}.json"
        if not out.exists():
            write_atomic(out, Case(name, r.scenario, codec.encode(r.scenario), "finding", self.backend, r.note,
                                   r.cause).to_json().encode())
        return out

    def save(self) -> None:
        for c in self.caches.values():
            c.save()


def repeat_count(rate: float) -> int:
    """Runs a replay needs to show a finding seen at `rate` with 99% odds (at least 1, at most 100)."""
    import math

    if rate >= 1.0:
        return 1
    if rate <= 0.0:
        return 100
    return max(1, min(100, math.ceil(math.log(0.01) / math.log(1.0 - rate))))


def cause_of(scn: Scenario, proto: Protocol, backend: str = "sim") -> str | None:
    """The root cause of one finding held in memory (a harness's crash), or None where it cannot be
    had within the per-finding bound (the caller then uses the raw signature)."""
    g = _Grouper(Path("."), backend, PER_FINDING, PER_FINDING, None, True)
    try:
        r = g.sim_cause(scn, proto)
    except EpfuzzError:
        return None
    finally:
        g.save()
    return None if isinstance(r, str) else r.cause


def group(paths: list[Path], out_dir: Path, backend: str = "sim", max_steps: int = MAX_STEPS,
          per_finding: int = PER_FINDING, stop: Callable[[], bool] | None = None,
          progress: Progress | None = None, cache: bool = True) -> Grouping:
    """Group raw finding cases by root cause, most frequent first; minimized cases go to `out_dir`."""
    g = _Grouper(out_dir, backend, max_steps, per_finding, stop, cache)
    bugs: dict[str, Bug] = {}
    left: list[Path] = []
    why = ""
    try:
        for i, path in enumerate(paths):
            try:
                r = g.one(path)
            except InputError:
                r = None
            if isinstance(r, str):
                left.append(path)
                why = why or r
            elif r is not None:
                if r.cause not in bugs:
                    try:
                        case = g.write(r, path)
                    except NoSpace as e:  # no room for the minimized case: the rest waits for triage too
                        left += paths[i:]
                        why = f"no room on the disk for minimized cases: {e}"
                        break
                    bugs[r.cause] = Bug(r.cause, case, r.note, r.minimized, [], r.repeats, r.rate)
                bugs[r.cause].raw.append(path)
            if progress is not None:
                progress(i + 1, len(paths), len(bugs))
    finally:
        g.save()
    return Grouping(sorted(bugs.values(), key=lambda b: (-b.count, b.cause)), left, why, g.steps)
