"""What a minimized finding needs, and the root cause made of it.

One question, asked of one scenario field at a time: does some other value of this field make
the finding disappear for every order the rules allow (`epfuzz explore`; where explore cannot
decide in its bound, the case's own schedule)? If so, the finding needs the field's value. The bug
table's root cause (`root_cause`) and `explain` both read this one analysis, so they name the
same knobs (the first wave's table said "adaptive_routing=True" where explain said it did not
matter; the second wave's omitted knobs at their simplest value, `mr_relaxed=True`,
`hca_o920=False`, that explain listed, and under a preset read "simplest knobs").

Knobs (the backend's signature fields) are tried at every other value; the shape (every other
field: epochs, tokens, QPs, delays, spins...) at its simpler values only, since "needs 3 epochs"
means fewer do not do. Each is a bounded number of explorations of a minimized, hence small,
scenario: `MAX_STATES` states each, at most `SHAPE_VALUES` values a field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epfuzz.backends.base import Outcome
from epfuzz.encoding.pins import fixed_fields
from epfuzz.infra.errors import EpfuzzError, InputError
from epfuzz.ir.fields import BoolField, ChoiceField, IntField, IntsField, ItemsField, NameField
from epfuzz.ir.presets import get_preset, model_of
from epfuzz.ir.scenario import Scenario, iter_leaf_fields
from epfuzz.protocols.base import Protocol

#: states explore may spend on one value of one field of a minimized case (a few TLPs: far less)
MAX_STATES = 20_000
#: the most simpler values of one shape field tried (the simplest and the nearest ones first)
SHAPE_VALUES = 4


@dataclass(frozen=True)
class Need:
    """The finding needs `path` at `value`: with `without` (and every other value tried) it is gone."""

    path: str
    value: Any
    without: tuple[Any, ...]
    pinned: str = ""          # "preset" or "protocol" where that pins the field, else ""

    def text(self) -> str:
        name = self.path if self.path.startswith("gpu.") else self.path.split(".")[-1]  # gpu.fence, not signal's
        return f"{name}={self.value}" + (f"[{self.pinned}]" if self.pinned else "")


@dataclass
class Needs:
    """What one scenario's finding needs, field by field, and how that was checked."""

    knobs: list[Need]
    irrelevant: list[str]      # knob paths some other value of which keeps the finding
    unfollowed: list[str]      # signal fields whose other values post the same ops
    shape: list[Need]
    method: str                # "exhaustive", "same schedule", or both where explore could not always decide
    steps: int = 0             # explorations made
    #: knob paths no other value of which makes a scenario this protocol runs: neither needed nor not
    untried: list[str] = field(default_factory=list)
    #: NIC knobs a GPU-model preset pins only to switch the NIC stages off (`knobs_to_ask`): not asked
    plumbing: list[str] = field(default_factory=list)


#: the gpu fields the sim's NVLink model reads (`epfuzz.model.ordering.gpu_signal_clause`: whether a signal is an
#: ordering point): under a GPU-model preset they are the knobs a finding may need
GPU_KNOBS = ("gpu.fence", "gpu.store", "gpu.path")


def knobs_to_ask(scn: Scenario, fields: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """(the knob fields to ask, the ones left out) for `scn`'s preset. Under a GPU-model preset (nvlink) the NIC
    knobs it pins only keep the NIC stages from reordering before the PTX clauses apply: another value of one is
    no platform at all, and the sim's answer there is an artefact (PCI_ATOMIC_MODE=0 made a GPU atomic the
    responder's read-modify-write, whose MemRd the stream keeps behind the earlier stores, so `explain` said an
    NVLink finding needed atomic_mode=4 and named no gpu.* knob: an author's trial, L3). They are left out; the
    gpu fields that decide a signal's clause are asked instead."""
    from epfuzz.protocols.platform_expect import GPU_MODELS

    if model_of(scn.preset) not in GPU_MODELS:
        return fields, []
    pins = get_preset(scn.preset).fixed
    return (tuple(f for f in fields if f not in pins) + tuple(g for g in GPU_KNOBS if g not in fields),
            [f for f in fields if f in pins])


def survives(scn: Scenario, proto: Protocol, kind: str | None, max_states: int = MAX_STATES) -> tuple[bool, str]:
    """(a violation of `kind` in some order the rules allow, how that was checked): exhaustively, or
    where explore cannot decide within `max_states`, in the scenario's own schedule."""
    from epfuzz.sim.engine import simulate
    from epfuzz.sim.explore import explore

    try:
        v, method = explore(scn, proto, max_states=max_states).violation, "exhaustive"
    except InputError:
        v, method = simulate(scn, proto).violation, "same schedule"
    return v is not None and (kind is None or v.kind == kind), method


def _other_values(spec: Any, value: Any, shape: bool) -> list[Any]:
    """The values of one field to try instead of `value`: every other one for a knob, the simpler
    ones (simplest and nearest first, at most SHAPE_VALUES) for the shape."""
    from epfuzz.triage.minimize import simpler_values

    if isinstance(spec, BoolField):
        return [not value] if not shape else simpler_values(spec, value)
    if isinstance(spec, ChoiceField) and not shape:
        return [o for o in spec.options if o != value]
    if isinstance(spec, (IntField, ChoiceField)):
        vals = simpler_values(spec, value)
        return (vals[:1] + vals[-(SHAPE_VALUES - 1):]) if len(vals) > SHAPE_VALUES else vals
    if isinstance(spec, (IntsField, ItemsField)) and value:
        return [()]
    return []


def _pinned(scn: Scenario, path: str) -> str:
    if path in get_preset(scn.preset).fixed:
        return "preset"
    return "protocol" if path in fixed_fields(scn.protocol, scn.preset) else ""


class _Asker:
    """Asks `survives` of one-field changes of one scenario, counting the explorations."""

    def __init__(self, scn: Scenario, proto: Protocol, kind: str | None) -> None:
        from epfuzz.triage.passes import Ctx

        self.scn, self.proto, self.kind = scn, proto, kind
        self.ctx = Ctx(scn, proto, fixed_fields(scn.protocol, scn.preset))
        self.steps = 0
        self.methods: set[str] = set()

    def killed_by(self, path: str, values: list[Any], every: bool = True) -> list[Any] | None:
        """The values of `values` with which the finding is gone: with `every`, empty as soon as one
        keeps it (else: every value tried, a count's fewer units killing a race that more keep);
        None where no value could be tried at all.

        A value is tried in every valid form the minimizer tries it in (`Ctx.changed`: fewer QPs
        with a channel's QP and the per-QP delays renumbered, then cut to fit) and is gone only if
        it is gone in each: `with_path` alone left `channel_qp` [6] with 1-6 QPs, no scenario, and
        num_qps=7 "did not matter" (pip trial, item 1). A value the protocol or the preset pins is
        still asked as it is: the finding needs the pinned value then."""
        gone = []
        tried_any = False
        for v in values:
            verdicts = []
            for cand in self.ctx.changed(path, v) or [self.scn.with_path(path, v)]:
                try:
                    self.steps += 1
                    alive, method = survives(cand, self.proto, self.kind)
                except EpfuzzError:  # not a scenario this protocol can run: says nothing either way
                    continue
                self.methods.add(method)
                verdicts.append(alive)
                if alive:
                    break
            tried_any |= bool(verdicts)
            if verdicts and not any(verdicts):
                gone.append(v)
            elif any(verdicts) and every:
                return []
        return gone if tried_any or not values else None


def needs(scn: Scenario, proto: Protocol, kind: str | None, knob_fields: tuple[str, ...],
          shape: bool = True) -> Needs:
    """Field by field, what the finding of `scn` needs (see the module's docstring)."""
    from epfuzz.model.follows import posted_ops

    ask = _Asker(scn, proto, kind)
    specs = dict(iter_leaf_fields())
    out = Needs([], [], [], [], "")
    knob_fields, out.plumbing = knobs_to_ask(scn, knob_fields)
    base_ops: list[Any] | None = None
    for path in knob_fields:
        value = scn.get_path(path)
        others = _other_values(specs[path], value, shape=False)
        if path.startswith("signal."):  # the protocol's to follow: a plug-in may post the same ops anyway
            base_ops = base_ops if base_ops is not None else posted_ops(scn, proto)
            others = [v for v in others if posted_ops(scn.with_path(path, v), proto) != base_ops]
            if not others:
                out.unfollowed.append(path)
                continue
        # a count knob (a plug-in's topology.num_qps) is needed where fewer units kill the finding; a gpu knob
        # where a stronger fence (or store, or a nearer consumer) does: `__threadfence` to a peer keeps it too
        gone = ask.killed_by(path, others, every=not isinstance(specs[path], IntField) and path not in GPU_KNOBS)
        if gone:
            out.knobs.append(Need(path, value, tuple(gone), _pinned(scn, path)))
        elif gone is None:
            out.untried.append(path)
        else:
            out.irrelevant.append(path)
    if shape:
        for path, spec in specs.items():
            if path in knob_fields or path in out.plumbing or path == "schedule" or isinstance(spec, NameField) \
                    or path.startswith("gpu."):
                continue
            gone = ask.killed_by(path, _other_values(spec, scn.get_path(path), shape=True))
            if gone:
                out.shape.append(Need(path, scn.get_path(path), tuple(gone), _pinned(scn, path)))
    out.method = " and ".join(sorted(ask.methods, reverse=False)) or "no"
    out.steps = ask.steps
    return out


def cause_line(scn: Scenario, outcome: Outcome, knobs: str) -> str:
    """protocol|preset|kind|cells|knobs: the one format of a signature and of a root cause."""
    v = outcome.violation
    rules = "+".join(sorted(outcome.rules_fired)) or "in-order"
    return f"{scn.protocol}|{scn.preset}|{v.kind if v else 'clean'}|{rules}|{knobs}"


#: the knob column when the finding needs no knob at all (it shows on every platform)
NO_KNOB = "no knob"
#: the knob column when it needs none of a protocol's own `signature_knobs`, a list that leaves out knobs `explain`
#: asks about: "no knob" there read as if the knobs explain says it needs were not needed (trial 0205 item 6)
NO_SIGNATURE_KNOB = "no signature knob"


def none_needed(proto: Protocol) -> str:
    """The knob column's words where the finding needs none of the knobs asked about: NO_KNOB, or
    NO_SIGNATURE_KNOB where the protocol's own `signature_knobs` leave out a knob of SIGNATURE_FIELDS, which
    `explain` asks about too (a `[protocol]` pin among them)."""
    from epfuzz.backends.base import SIGNATURE_FIELDS

    own = proto.signature_knobs
    return NO_SIGNATURE_KNOB if own and not set(SIGNATURE_FIELDS) <= set(own) else NO_KNOB


def root_cause(scn: Scenario, outcome: Outcome, proto: Protocol, fields: tuple[str, ...]) -> tuple[str, Needs]:
    """The root cause of a minimized finding on the sim: its kind, the rule cells that fired, and
    every knob of `fields` it needs at its value ("[preset]"/"[protocol]" where that pins it)."""
    kind = outcome.violation.kind if outcome.violation else None
    got = needs(scn, proto, kind, fields, shape=False)
    return cause_line(scn, outcome, ",".join(n.text() for n in got.knobs) or none_needed(proto)), got


def knob_line(scn: Scenario, outcome: Outcome, proto: Protocol, keep_knob: Callable[[str], bool],
              empty: str) -> str:
    """A signature or a hardware cause: the signature fields `keep_knob` keeps, with their values."""
    from epfuzz.backends import get_backend

    names = get_backend(outcome.backend, require=False).signature_fields(proto)
    return cause_line(scn, outcome, ",".join(f"{k.split('.')[-1]}={scn.get_path(k)}" for k in names
                                             if keep_knob(k)) or empty)


def moved_knobs_cause(scn: Scenario, outcome: Outcome, proto: Protocol) -> str:
    """The cause on a nondeterministic backend, after `minimize.reduce_knobs`: the signature knobs
    away from their simplest value (what an empty input decodes to). No exploration runs there, so
    a knob at its simplest value that the bug needs is not named: the sim's `root_cause` does that."""
    from epfuzz.backends import get_backend
    from epfuzz.encoding import codec

    simplest = codec.decode(b"", scn.protocol, scn.preset)
    moved = [k for k in get_backend(outcome.backend, require=False).signature_fields(proto)
             if scn.get_path(k) != simplest.get_path(k)]
    return knob_line(scn, outcome, proto, lambda k: k in moved, none_needed(proto))
