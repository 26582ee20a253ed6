"""Structure-aware minimization of a finding, to a 1-minimal scenario.

Like Hypothesis' shrinker, it works on the IR, not the bytes: it removes
schedule entries, spins and per-QP faults (one at a time, then two at a time:
an overtake, its undo and the overtake again need a pair removal to shrink to
the one overtake, since dropping any single one leaves the identity or a
different order), lowers every integer towards its
simplest value, moves every choice towards its first option, and repeats until
no single removal or simplification keeps the finding (1-minimal, checked by
`is_one_minimal`). Candidates are validated through the same JSON loader as any
user input, so the result is always a valid scenario.

On a nondeterministic backend each candidate is run `repeats` times and kept
only if it still reproduces in at least `threshold` of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from epfuzz import codec
from epfuzz.backends import Backend, Outcome, get_backend
from epfuzz.errors import EpfuzzError
from epfuzz.fields import BoolField, ChoiceField, FieldSpec, IntField, IntsField, ItemsField
from epfuzz.pins import fixed_fields
from epfuzz.protocols.base import Protocol
from epfuzz.scenario import Scenario, iter_leaf_fields

Predicate = Callable[[Scenario], bool]


@dataclass
class Minimized:
    original: Scenario
    result: Scenario
    runs: int
    seconds: float
    #: the run that verified `result`; on hardware a second run could disagree with it
    outcome: Outcome
    #: False when `max_runs`/`max_seconds` stopped the search: `result` is then the best so far,
    #: not checked to be 1-minimal
    complete: bool = True

    @property
    def rate(self) -> float:
        return self.outcome.rate

    def sizes(self) -> tuple[int, int]:
        return len(codec.encode(self.original)), len(codec.encode(self.result))


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    out = dict(doc)
    if rest:
        out[head] = dict(doc.get(head, {}))
        out[head][rest] = value
    else:
        out[head] = value
    return out


def _smaller_ints(v: int, lo: int) -> list[int]:
    """lo first, then halfway points, then v-1: big steps before small ones."""
    out: list[int] = []
    if v <= lo:
        return out
    out.append(lo)
    # the next few small values: an overtake index is taken modulo the TLP count
    out += [x for x in range(lo + 1, min(v, lo + 4))]
    d = (v - lo) // 2
    while d > 0:
        if v - d not in out:
            out.append(v - d)
        d //= 2
    if v - 1 not in out:
        out.append(v - 1)
    return out


def _simplify_value(spec: FieldSpec, v: Any) -> list[Any]:
    if isinstance(spec, IntField):
        return _smaller_ints(v, spec.lo)
    if isinstance(spec, BoolField):
        return [False] if v else []
    if isinstance(spec, ChoiceField):
        return list(spec.options[: spec.options.index(v)])
    return []


def candidates(scn: Scenario) -> Iterator[Scenario]:
    """Every single removal or simplification of `scn` that is a valid scenario, simplest first."""
    fixed = fixed_fields(scn.protocol, scn.preset)
    doc = scn.to_dict()

    def valid(d: dict[str, Any]) -> Scenario | None:
        try:
            return codec.load_dict(d)
        except EpfuzzError:
            return None

    leaves = list(iter_leaf_fields())
    # removals first: they shrink the most
    for path, f in leaves:
        if not isinstance(f, (IntsField, ItemsField)) or path in fixed:
            continue
        seq = scn.get_path(path)
        for i in range(len(seq)):
            lst = list(_get(doc, path))
            del lst[i]
            c = valid(_set(doc, path, lst))
            if c is not None:
                yield c
    yield from _pair_removals(doc, leaves, fixed, valid)
    for path, f in leaves:
        if path in fixed:
            continue
        if isinstance(f, (IntField, BoolField, ChoiceField)):
            for nv in _simplify_value(f, scn.get_path(path)):
                c = valid(_set(doc, path, nv))
                if c is not None:
                    yield c
        elif isinstance(f, IntsField):
            lst = list(scn.get_path(path))
            for i, x in enumerate(lst):
                for nv in _smaller_ints(x, f.lo):
                    c = valid(_set(doc, path, lst[:i] + [nv] + lst[i + 1:]))
                    if c is not None:
                        yield c
        elif isinstance(f, ItemsField):
            items = list(_get(doc, path))
            sub = f.cls
            for i, item in enumerate(items):
                for sp, sf in iter_leaf_fields(sub):
                    for nv in _simplify_value(sf, item[sp]):
                        new = items[:i] + [{**item, sp: nv}] + items[i + 1:]
                        c = valid(_set(doc, path, new))
                        if c is not None:
                            yield c


def _pair_removals(doc: dict[str, Any], leaves: list[tuple[str, FieldSpec]], fixed: Any,
                   valid: Callable[[dict[str, Any]], Scenario | None]) -> Iterator[Scenario]:
    """Every removal of two entries of one list: reached only when no single removal kept the
    finding, so it costs nothing on cases that single removals already shrink."""
    for path, f in leaves:
        if not isinstance(f, ItemsField) or path in fixed:
            continue
        seq = list(_get(doc, path))
        for i, j in combinations(range(len(seq)), 2):
            c = valid(_set(doc, path, [x for k, x in enumerate(seq) if k not in (i, j)]))
            if c is not None:
                yield c


def _get(doc: dict[str, Any], path: str) -> Any:
    obj: Any = doc
    for p in path.split("."):
        obj = obj[p]
    return obj


def _holds(out: Outcome, threshold: float, kind: str | None) -> bool:
    """The run shows the finding: a violation (of `kind`, when given) in `threshold` of its repeats."""
    return out.violation is not None and (not kind or out.violation.kind == kind) and out.rate >= threshold


def reproduces(backend: Backend, proto: Protocol, repeats: int, threshold: float, kind: str | None) -> Predicate:
    def pred(s: Scenario) -> bool:
        return _holds(backend.run(s, proto, repeats=repeats), threshold, kind)

    return pred


def minimize(scn: Scenario, proto: Protocol, backend: str = "sim", repeats: int = 1, threshold: float = 0.5,
             predicate: Predicate | None = None, max_runs: int = 20000,
             max_seconds: float | None = None) -> Minimized:
    """Shrink until 1-minimal, or until `max_runs` candidates or `max_seconds` (then: the best so far)."""
    b = get_backend(backend)
    if b.deterministic:
        repeats = 1
    first = b.run(scn, proto, repeats=repeats)
    if first.violation is None:
        raise EpfuzzError(f"scenario {scn.digest()} does not reproduce a finding on {backend}; nothing to minimize")
    pred = predicate or reproduces(b, proto, repeats, threshold, first.violation.kind)
    t0 = time.perf_counter()
    runs = 0
    current = scn
    accepted = [scn]
    improved = True
    complete = True
    while improved:
        improved = False
        for cand in candidates(current):
            if runs >= max_runs or (max_seconds is not None and time.perf_counter() - t0 > max_seconds):
                complete = False
                break
            runs += 1
            if pred(cand):
                current = cand
                accepted.append(cand)
                improved = True
                break
    out = b.run(current, proto, repeats=repeats)
    # a flaky reproduction can slip through once: on a nondeterministic backend, step back
    # through the accepted candidates until one reproduces again at the threshold
    while not b.deterministic and out.rate < threshold and len(accepted) > 1:
        accepted.pop()
        current = accepted[-1]
        out = b.run(current, proto, repeats=repeats)
    return Minimized(scn, current, runs, time.perf_counter() - t0, out, complete)


def reduce_knobs(scn: Scenario, proto: Protocol, backend: Backend, fields: tuple[str, ...], repeats: int = 5,
                 threshold: float = 0.4, max_seconds: float | None = None) -> tuple[Scenario, Outcome, bool] | None:
    """Each of `fields` away from its simplest value (an empty input's) set to it where the finding
    survives that, one at a time in order: (scenario, its outcome, whether every field was tried),
    or None when the finding does not reproduce at `threshold` to begin with.

    What a summary groups findings by on a backend where full minimization costs too much (a verbs
    run is ~50 ms in the guest, a campaign's findings would need minutes): the root cause is
    made of these fields alone, so setting the ones the finding does not need is all the grouping
    needs. A dropped field is one the finding was seen without (in 2 of 5 runs); one kept may only
    have been unlucky (a finding seen in 60% of runs passes 2 of 5 in 91% of tries, 2 of 3 in 65%),
    so a flaky finding can split into two groups, but two bugs never merge."""
    t0 = time.perf_counter()
    simplest = codec.decode(b"", scn.protocol, scn.preset)
    first = backend.run(scn, proto, repeats=repeats)
    if first.violation is None or not _holds(first, threshold, None):
        return None
    kind = first.violation.kind
    current, out, complete = scn, first, True
    for path in fields:
        if current.get_path(path) == simplest.get_path(path):
            continue
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            complete = False
            break
        try:
            cand = codec.load_dict(current.with_path(path, simplest.get_path(path)).to_dict())
            got = backend.run(cand, proto, repeats=repeats)
        except EpfuzzError:
            continue
        if _holds(got, threshold, kind):
            current, out = cand, got
    return current, out, complete


def is_one_minimal(scn: Scenario, predicate: Predicate) -> bool:
    return predicate(scn) and not any(predicate(c) for c in candidates(scn))
