"""The minimizer's passes: every single step from a scenario towards a simpler one, by field.

"Simpler" is defined once per field type (`simpler_values`); a pass is a generator of (position, candidate)
over the current scenario (`Ctx`), so the search (`epfuzz.triage.minimize`) can resume a pass at the field it
last shrank. See `epfuzz.triage.minimize` for the order and why; `epfuzz.triage.trade` for adaptive routing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import combinations
from typing import Any

from epfuzz.encoding import codec
from epfuzz.encoding.pins import fixed_fields
from epfuzz.infra.errors import EpfuzzError
from epfuzz.ir.fields import BoolField, ChoiceField, FieldSpec, IntField, IntsField, ItemsField
from epfuzz.ir.scenario import Scenario, iter_leaf_fields
from epfuzz.protocols.base import Protocol
from epfuzz.triage.remap import doc_get as _get
from epfuzz.triage.remap import doc_set as _set
from epfuzz.triage.remap import relabelled, remapped
from epfuzz.triage.trade import trade_ar

#: (field position within its pass, candidate): a pass resumes at the position it last shrank
Step = tuple[int, Scenario]


def _smaller_ints(v: int, lo: int) -> list[int]:
    """lo first, then the next few small values, then halfway points, then v-1: big steps first."""
    out: list[int] = []
    if v <= lo:
        return out
    out.append(lo)
    out += [x for x in range(lo + 1, min(v, lo + 4))]
    d = (v - lo) // 2
    while d > 0:
        if v - d not in out:
            out.append(v - d)
        d //= 2
    if v - 1 not in out:
        out.append(v - 1)
    return out


def simpler_values(spec: FieldSpec, v: Any) -> list[Any]:
    """Every value of one field simpler than `v`, simplest first: the one definition of "simpler"."""
    if isinstance(spec, IntField):
        return _smaller_ints(v, spec.lo)
    if isinstance(spec, BoolField):
        return [False] if v else []
    if isinstance(spec, ChoiceField):
        return list(spec.options[: spec.options.index(v)])
    return []


def fit(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with every list cut to the length, and every bounded value lowered to the bound, that
    the fields before it allow (an item whose value is out of bound is dropped)."""
    out = doc
    values: dict[str, Any] = {}
    for path, spec in iter_leaf_fields():
        v = _get(out, path)
        if isinstance(spec, IntField):
            v = min(v, spec.hi_for(values)) if isinstance(v, int) else v
        elif isinstance(spec, IntsField) and isinstance(v, list):
            hi = spec.hi_for(values)
            v = [min(x, hi) if isinstance(x, int) else x for x in v[: spec.len_for(values)]]
        elif isinstance(spec, ItemsField) and isinstance(v, list):
            bounded = [(sp, sf) for sp, sf in iter_leaf_fields(spec.cls) if isinstance(sf, IntField)]
            v = [it for it in v if all(not isinstance(it.get(sp), int) or it[sp] <= sf.hi_for(values)
                                       for sp, sf in bounded)]
        if v != _get(out, path):
            out = _set(out, path, v)
        values[path] = v
    return out


class Ctx:
    """What the passes share for one current scenario: its JSON form, its pins, its sim build and run (each made
    on first use). Setting `scn` drops the build and the run and remakes the JSON form: no pass reads another's."""

    def __init__(self, scn: Scenario, proto: Protocol | None, fixed: dict[str, Any]) -> None:
        self.proto, self.fixed, self.scn = proto, fixed, scn

    @property
    def scn(self) -> Scenario:
        return self._scn

    @scn.setter
    def scn(self, scn: Scenario) -> None:
        self._scn = scn
        self.doc: dict[str, Any] = scn.to_dict()
        self._run: Any = None  # the build: a SimRun, False where it cannot be built, None not yet asked
        self._simulated: Any = None  # the replayed run, the same way

    def valid(self, d: dict[str, Any]) -> Scenario | None:
        """`d` as a scenario; where one change leaves a field it bounds out of range (fewer channels than `channel_qp`
        names, fewer QPs than a channel's QP), that field cut to fit: else 6 channels could never lose one."""
        for attempt in (d, fit(d)):
            try:
                return codec.load_dict(attempt)
            except EpfuzzError:
                continue
        return None

    def changed(self, path: str, value: Any) -> list[Scenario]:
        """The valid forms of the current scenario with one field set to `value`: the units it counts
        renumbered (`remapped`: a count lowered), then cut to fit; one form where those agree."""
        doc = self.doc
        out: list[Scenario] = []
        moved = remapped(doc, path, value) if isinstance(value, int) and not isinstance(value, bool) else None
        if moved is not None and any(_get(moved, p) != _get(doc, p) for p in self.fixed):
            moved = None  # it would move a field the preset or the protocol pins
        for d in (moved, _set(doc, path, value)):
            c = self.valid(d) if d is not None else None
            if c is not None and c not in out:
                out.append(c)
        return out

    def run(self) -> Any:
        """The current scenario built on the sim (None where it cannot be): what overtakes index."""
        if self._run is None and self.proto is not None:
            from epfuzz.sim.engine import build
            try:
                self._run = build(self.scn, self.proto)
            except EpfuzzError:
                self._run = False
        return self._run or None

    def simulated(self) -> Any:
        """The current scenario simulated (None where it cannot be): where its finding's culprits are read."""
        if self._simulated is None and self.proto is not None:
            from epfuzz.sim.engine import simulate
            try:
                self._simulated = simulate(self.scn, self.proto)
            except EpfuzzError:
                self._simulated = False
        return self._simulated or None


def _leaf_steps(ctx: Ctx, path: str, spec: FieldSpec) -> Iterator[Scenario]:
    """Every simplification of one leaf of `ctx.scn`, simplest first."""
    doc = ctx.doc
    if isinstance(spec, (IntField, BoolField, ChoiceField)):
        for nv in simpler_values(spec, _get(doc, path)):
            yield from ctx.changed(path, nv)
    elif isinstance(spec, IntsField):
        lst = list(_get(doc, path))
        for i, x in enumerate(lst):
            for nv in _smaller_ints(x, spec.lo):
                c = ctx.valid(_set(doc, path, lst[:i] + [nv] + lst[i + 1:]))
                if c is not None:
                    yield c
                # a unit's index lower with what it carries: only towards a smaller list, so no cycle
                swapped = relabelled(doc, spec.hi_from, x, nv) if spec.hi_from else None
                if swapped is not None and list(_get(swapped, path)) < lst:
                    c = ctx.valid(swapped)
                    if c is not None:
                        yield c
    elif isinstance(spec, ItemsField):
        items = list(_get(doc, path))
        for i, item in enumerate(items):
            for sp, sf in iter_leaf_fields(spec.cls):
                for nv in simpler_values(sf, item[sp]):
                    c = ctx.valid(_set(doc, path, items[:i] + [{**item, sp: nv}] + items[i + 1:]))
                    if c is not None:
                        yield c


def _leaves(paths: tuple[str, ...] | None, exclude: frozenset[str] = frozenset()) -> list[tuple[str, FieldSpec]]:
    """The scenario's leaves named in `paths` (in that order), or every leaf not in `exclude`."""
    specs = dict(iter_leaf_fields())
    if paths is not None:
        return [(p, specs[p]) for p in paths]
    return [(p, s) for p, s in specs.items() if p not in exclude and not p.startswith("schedule")]


def remove_entries(ctx: Ctx) -> Iterator[Step]:
    """Each entry of each list dropped; and the whole schedule traded for one QP at its slowest (`_slower`),
    where timing across QPs shows the finding without any overtake.

    Why the trade: one race across QPs (a signal on another QP than its data) is reached by the fuzzer as an
    overtake at the responder (`xQP`), one on the wire (`cross-QP`) or timing alone (`in-order`), and each
    1-minimal case kept the way it was found: one mistake was 3 bugs (pip trial, item 1). A case that needs no
    reordering is the simplest claim (the table's rule cells are then none), so every case that timing alone
    can show ends there, and the ways agree."""
    for pos, (path, f) in enumerate(iter_leaf_fields()):
        if not isinstance(f, (IntsField, ItemsField)) or path in ctx.fixed:
            continue
        seq = list(_get(ctx.doc, path))
        for i in range(len(seq)):
            c = ctx.valid(_set(ctx.doc, path, seq[:i] + seq[i + 1:]))
            if c is not None:
                yield pos, c
        if path == "schedule" and seq and _across_qps_only(ctx):
            bare = ctx.valid(_set(ctx.doc, path, []))
            for v in _slower(ctx, bare) if bare is not None else ():
                yield pos, v


#: the rule cells of a race across QPs: the overtakes the schedule-for-timing trade may replace
ACROSS_QPS = frozenset({"xQP", "cross-QP"})


def _across_qps_only(ctx: Ctx) -> bool:
    """Whether the case's finding rests on reorderings across QPs alone (its sim culprits): only then is timing
    another way to one race. A finding that needs a PCIe or NIC overtake (C2b) could otherwise be traded for a
    different race of the same kind in a protocol that has both, and its bug would be grouped as the other."""
    run = ctx.simulated()
    return run is not None and run.violation is not None and run.culprit_rules() <= ACROSS_QPS


#: the shape, biggest savings first: what makes a case big to read and slow to explore
SHAPE = ("payload.epochs", "payload.num_tokens", "topology.num_channels", "topology.num_qps",
         "payload.hidden_bytes", "payload.scale_bytes", "payload.meta_bytes", "chunking.tokens_per_wr",
         "chunking.splits_per_token", "chunking.mtu", "chunking.max_payload", "topology.channel_qp",
         "faults.spins", "faults.qp_delay_ns", "faults.qp_rate_div", "faults.port_delay_ns",
         "faults.port_rate_div", "faults.rx_lag")


#: the counts a shrink may trade for finer chunking: fewer tokens (or channels, epochs) with TLPs or
#: packets cut smaller keep a split the bug needs inside a token (an in-band tag passing its own
#: token's first TLP needed 6 tokens at max_payload 1024; 1 token at 128 shows it as well)
COUNTS = frozenset({"payload.epochs", "payload.num_tokens", "topology.num_channels"})
FINER = ("chunking.max_payload", "chunking.mtu")


def _with_schedule(ctx: Ctx, c: Scenario) -> Iterator[Scenario]:
    """`c`, then `c` with its overtakes re-addressed to the same units, each way (where that differs)."""
    from epfuzz.triage.readdress import VARIANTS, readdress

    yield c
    run = ctx.run() if ctx.scn.schedule else None
    tried = {c.schedule}
    for variant in VARIANTS if run is not None else ():
        r = readdress(run, c, ctx.proto, variant)  # type: ignore[arg-type]
        if r is not None and r.schedule not in tried:
            tried.add(r.schedule)
            v = ctx.valid(r.to_dict())
            if v is not None:
                yield v


#: the sizes a shrink may trade for a delay: a race across QPs that timing alone exposes (no overtake)
#: needs its data QP slower once there are fewer bytes to send (it kept 2 tokens of 7.6 KB, 18 TLPs)
SIZES = COUNTS | {"payload.hidden_bytes", "payload.scale_bytes", "payload.meta_bytes"}
SLOWEST = 65535


def _slower(ctx: Ctx, c: Scenario) -> Iterator[Scenario]:
    """`c` with one QP's added latency at its most, for each QP, where `ctx`'s finding is timing
    across QPs (several QPs, no overtakes in `c`); the latency is then lowered again like any value."""
    if c.schedule or c.topology.num_qps < 2 or "faults.qp_delay_ns" in ctx.fixed:
        return
    for q in range(c.topology.num_qps):
        d = list(c.faults.qp_delay_ns) + [0] * (q + 1 - len(c.faults.qp_delay_ns))
        if d[q] != SLOWEST:
            d[q] = SLOWEST
            v = ctx.valid(_set(c.to_dict(), "faults", {**c.to_dict()["faults"], "qp_delay_ns": d}))
            if v is not None:
                yield v


def shrink_shape(ctx: Ctx) -> Iterator[Step]:
    specs = dict(iter_leaf_fields())
    for pos, (path, f) in enumerate(_leaves(SHAPE)):
        if path in ctx.fixed:
            continue
        for c in _leaf_steps(ctx, path, f):
            for v in _with_schedule(ctx, c):
                yield pos, v
            if path in SIZES:
                for v in _slower(ctx, c):
                    yield pos, v
            if path not in COUNTS:
                continue
            for finer in FINER:  # the count down, and the chunking finer (never the other way)
                if finer in ctx.fixed:
                    continue
                opts = specs[finer].options  # type: ignore[attr-defined]
                for o in opts[opts.index(c.get_path(finer)) + 1:]:
                    joint = ctx.valid(_set(c.to_dict(), finer, o))
                    if joint is not None:
                        for v in _with_schedule(ctx, joint):
                            yield pos, v


def _section_steps(ctx: Ctx, leaves: list[tuple[str, FieldSpec]]) -> Iterator[Step]:
    for pos, (path, f) in enumerate(leaves):
        if path not in ctx.fixed:
            for c in _leaf_steps(ctx, path, f):
                yield pos, c


def simplify_knobs(ctx: Ctx) -> Iterator[Step]:
    yield from _section_steps(ctx, [(p, s) for p, s in iter_leaf_fields() if p.startswith(("knobs.", "signal."))])


def simplify_schedule(ctx: Ctx) -> Iterator[Step]:
    """Each overtake's index to the one naming the same TLP (modulo the run's count), then the
    usual simpler values of its fields."""
    if "schedule" in ctx.fixed or not ctx.scn.schedule:
        return
    from epfuzz.triage.readdress import canonical_index

    run = ctx.run()
    items = list(ctx.doc["schedule"])
    for i, o in enumerate(ctx.scn.schedule):
        k = canonical_index(run, o) if run is not None else o.index
        if k != o.index:
            c = ctx.valid(_set(ctx.doc, "schedule", items[:i] + [{**items[i], "index": k}] + items[i + 1:]))
            if c is not None:
                yield i, c
    specs = dict(iter_leaf_fields())
    for _, c in _section_steps(ctx, [("schedule", specs["schedule"])]):
        yield len(items), c


def simplify_rest(ctx: Ctx) -> Iterator[Step]:
    known = frozenset(SHAPE) | {p for p, _ in iter_leaf_fields() if p.startswith(("knobs.", "signal."))}
    yield from _section_steps(ctx, [(p, s) for p, s in _leaves(None, known)
                                    if not isinstance(s, (IntsField, ItemsField)) or p not in SHAPE])


def remove_pairs(ctx: Ctx) -> Iterator[Step]:
    """Every removal of two entries of one list: reached only when no single step kept the finding, so it costs
    nothing on cases that single steps already shrink."""
    for pos, (path, f) in enumerate(iter_leaf_fields()):
        if not isinstance(f, ItemsField) or path in ctx.fixed:
            continue
        seq = list(_get(ctx.doc, path))
        for i, j in combinations(range(len(seq)), 2):
            c = ctx.valid(_set(ctx.doc, path, [x for k, x in enumerate(seq) if k not in (i, j)]))
            if c is not None:
                yield pos, c


Pass = Callable[[Ctx], Iterator[Step]]
#: the single-step passes, in the order a round runs them; `remove_pairs` follows a round that changed nothing
PASSES: tuple[Pass, ...] = (remove_entries, shrink_shape, trade_ar, simplify_knobs, simplify_schedule, simplify_rest)


def candidates(scn: Scenario, proto: Protocol | None = None) -> Iterator[Scenario]:
    """Every single step of every pass from `scn` (with `proto`: re-addressed shape steps too), then pairs."""
    ctx = Ctx(scn, proto, fixed_fields(scn.protocol, scn.preset))
    for p in (*PASSES, remove_pairs):
        for _, c in p(ctx):
            yield c
