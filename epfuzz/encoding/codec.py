"""Scenario <-> bytes and JSON, with the fields a (protocol, preset) pins held fixed.

The schema walk is done once per (protocol, preset) into a plan: one slot per
field, holding its spec, its pinned value (if any) and the plan of its nested
class. Decoding, encoding and JSON loading all run over that plan and leave the
per-kind work to the spec (`epfuzz.ir.fields`), which is what keeps the three in
step and decoding cheap enough for the fuzzer's hot loop.

Pinned fields take no bytes (the fuzzer spends no effort on dead knobs), and JSON
that contradicts them is rejected with the name of the field. The protocol and
preset names are pinned the same way: they choose the plan, so they never take bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from epfuzz.encoding import plancore
from epfuzz.encoding.codec_compile import Decoder, Encoder, compile_encoder, compile_plan, compile_program
from epfuzz.encoding.pins import fixed_fields
from epfuzz.infra.errors import ScenarioError
from epfuzz.ir.choices import ChoiceReader, ChoiceWriter
from epfuzz.ir.fields import FieldSpec, ItemsField, SectionField, Values, specs
from epfuzz.ir.scenario import Scenario

_FREE = object()

#: whether `plancore` runs compiled (mypyc, `epfuzz.core.native`): then `decode` runs the plan as its data,
#: else (the pure path) through the plan's generated Python, which the interpreter runs faster than the loop
LOOP = not str(plancore.__file__).endswith(".py")


@dataclass(frozen=True, slots=True)
class _Slot:
    name: str
    path: str
    spec: FieldSpec
    fixed: Any  # the pinned value, or _FREE
    nested: _Plan | None


class _Plan:
    """The compiled schema of one dataclass under one set of pins (implements `fields.Nested`)."""

    __slots__ = ("_compiled", "_encoder", "_program", "cls", "names", "slots")

    def __init__(self, cls: type, prefix: str, fixed: Mapping[str, Any]) -> None:
        self.cls = cls
        self.slots: list[_Slot] = []
        for name, spec in specs(cls):
            path = f"{prefix}{name}"
            nested = (_Plan(spec.cls, path + ".", fixed)
                      if isinstance(spec, (SectionField, ItemsField)) else None)
            self.slots.append(_Slot(name, path, spec, fixed.get(path, _FREE), nested))
        self.names = frozenset(s.name for s in self.slots)
        self._compiled: Decoder | None = None
        self._encoder: Encoder | None = None
        self._program: plancore.Program | None = None

    def program(self) -> plancore.Program:
        """The plan as `plancore`'s data (`codec_compile.compile_program`), built on first use."""
        prog = self._program
        if prog is None:
            prog = self._program = compile_program(self, _FREE)
            if self.cls is Scenario:  # a whole scenario's: its loop records only what bounds read
                plancore.keep_read(prog)
        return prog

    def decode(self, r: ChoiceReader, values: Values) -> Any:
        """Decode through the plan compiled to straight-line code (`epfuzz.encoding.codec_compile`), built on
        first use."""
        fn = self._compiled
        if fn is None:
            fn = self._compiled = compile_plan(self, _FREE)
        return fn(r, values)

    def walk_decode(self, r: ChoiceReader, values: Values) -> Any:
        """The plan walked slot by slot: what the compiled decoder must equal (tests compare the two)."""
        out: dict[str, Any] = {}
        for s in self.slots:
            v = s.fixed if s.fixed is not _FREE else self._walk_slot(s, r, values)
            values[s.path] = v
            out[s.name] = v
        return self.cls(**out)

    @staticmethod
    def _walk_slot(s: _Slot, r: ChoiceReader, values: Values) -> Any:
        if isinstance(s.spec, (SectionField, ItemsField)):
            nested = s.nested
            assert nested is not None  # a section or items slot always has its plan (_Plan.__init__)
            if isinstance(s.spec, SectionField):
                return nested.walk_decode(r, values)
            # as ItemsField.draw, walking the items too
            return tuple(nested.walk_decode(r, values) for _ in range(r.draw(0, s.spec.max_len)))
        return s.spec.draw(r, values, s.nested)

    def encode(self, w: ChoiceWriter, values: Values, obj: Any) -> None:
        """Encode through the plan's compiled encoder (`codec_compile.compile_encoder`), built on first use."""
        fn = self._encoder
        if fn is None:
            fn = self._encoder = compile_encoder(self, _FREE)
        fn(w, values, obj)

    def walk_encode(self, w: ChoiceWriter, values: Values, obj: Any) -> None:
        """The plan walked slot by slot: what the compiled encoder must equal (tests compare the two)."""
        for s in self.slots:
            v = getattr(obj, s.name)
            values[s.path] = v
            if s.fixed is not _FREE:
                continue
            if isinstance(s.spec, (SectionField, ItemsField)):  # nested plans walked too, as `_walk_slot`
                nested = s.nested
                assert nested is not None
                if isinstance(s.spec, SectionField):
                    nested.walk_encode(w, values, v)
                    continue
                w.write(0, s.spec.max_len, len(v))
                for item in v:
                    nested.walk_encode(w, values, item)
                continue
            s.spec.write(w, values, v, s.nested)

    def load(self, prefix: str, raw: Any, values: Values) -> Any:
        if not isinstance(raw, Mapping):
            raise ScenarioError(prefix.rstrip(".") or "<root>", f"expected an object, got {json.dumps(raw)}")
        for key in raw:
            if key not in self.names:
                raise ScenarioError(f"{prefix}{key}", "unknown field")
        out: dict[str, Any] = {}
        for s in self.slots:
            default = s.spec.json_default() if s.fixed is _FREE else s.fixed
            v = s.spec.check(s.path, raw.get(s.name, default), values, s.nested)
            if s.fixed is not _FREE and v != s.fixed:
                raise ScenarioError(s.path, f"{json.dumps(v)} contradicts the value {json.dumps(s.fixed)} "
                                            "fixed by the protocol or preset")
            values[s.path] = v
            out[s.name] = v
        return self.cls(**out)


_plans: dict[tuple[str, str], _Plan] = {}


def _plan_for(protocol: str, preset: str) -> _Plan:
    key = (protocol, preset)
    plan = _plans.get(key)
    if plan is None:
        pins = {**fixed_fields(protocol, preset), "protocol": protocol, "preset": preset}
        plan = _plans[key] = _Plan(Scenario, "", pins)
    return plan


# ---------------------------------------------------------------- public API


def decoder_for(protocol: str, preset: str = "spec") -> Callable[[ChoiceReader], Scenario]:
    """The byte decoder for one (protocol, preset): what a fuzzer harness or mutator drives.

    Raises `InputError` at once for an unknown protocol or preset.
    """
    plan = _plan_for(protocol, preset)

    # the generated decoder, not the compiled loop: `search.context.field_bounds` records this reader's draws
    def decode_reader(r: ChoiceReader) -> Scenario:
        scn: Scenario = plan.decode(r, {})
        return scn

    return decode_reader


#: (protocol, preset) -> its plan's `plancore.Program` (`_Plan.program`), for `decode`: one look-up per fresh
#: scenario, not `_plan_for`'s and `program`'s interpreted frames (issue 31)
_programs: dict[tuple[str, str], plancore.Program] = {}


def decode(data: bytes, protocol: str, preset: str = "spec") -> Scenario:
    """Any byte string is a valid scenario; missing bytes decode as the simplest values."""
    if LOOP:
        prog = _programs.get((protocol, preset))
        if prog is None:
            prog = _programs[(protocol, preset)] = _plan_for(protocol, preset).program()
        scn: Scenario = prog.decode(data)
        return scn
    scn = _plan_for(protocol, preset).decode(ChoiceReader(data), {})
    return scn


def encode(scn: Scenario) -> bytes:
    """The shortest bytes that `decode` turns back into `scn` under its own protocol and preset."""
    writer = ChoiceWriter()
    _plan_for(scn.protocol, scn.preset).encode(writer, {}, scn)
    # missing bytes decode as zeros, so trailing zeros carry nothing: drop them
    return writer.getvalue().rstrip(b"\0")


@dataclass(frozen=True, slots=True)
class Split:
    """A scenario's encoding cut around one top-level field (`split`): the bytes before and after it, and
    the values recorded before it (what that field's bounds may read), so that `encode_split` writes the
    scenario with another value of that field without walking the rest again."""

    head: bytes
    tail: bytes
    values: dict[str, Any]
    slot: _Slot | None     # None where the field is pinned (it takes no bytes)


def split(scn: Scenario, name: str = "schedule") -> Split:
    """`scn`'s encoding around its top-level field `name` (unstripped: `encode_split` strips the joined bytes).

    The top-level walk of `_Plan.walk_encode`, the nested parts through their compiled encoders (the tests
    hold those to the walk). Why the tail is the same whatever the value of `name`: its bytes are written
    from the fields after `name` and the bounds those read from `values` (`hi_from`, `len_from`, `hi_fn`);
    here they are written with no value of `name` (nor of a path under it) in `values`, so a bound that read
    one would raise KeyError, and no split is made. tests/scenario/test_codec.py compares
    `encode_split(split(s), x)` with `encode(s.replace(name=x))` for every protocol and preset."""
    plan = _plan_for(scn.protocol, scn.preset)
    w = ChoiceWriter()
    values: Values = {}
    at: Values = {}
    mark, cut = -1, None
    for s in plan.slots:
        v = getattr(scn, s.name)
        if s.name == name:
            at, mark = dict(values), len(w.parts)
            cut = s if s.fixed is _FREE else None
            continue
        values[s.path] = v
        if s.fixed is not _FREE:
            continue
        try:
            if isinstance(s.spec, SectionField):
                assert s.nested is not None
                s.nested.encode(w, values, v)
            else:
                s.spec.write(w, values, v, s.nested)
        except KeyError as e:
            raise ValueError(f"{s.path}: a bound reads {e}: no split encoding around {name}") from None
    if mark < 0:
        raise ValueError(f"no top-level field {name}")
    return Split(b"".join(w.parts[:mark]), b"".join(w.parts[mark:]), at, cut)


def encode_split(cut: Split, value: Any) -> bytes:
    """`encode(scn.replace(<field>=value))` for the scenario `cut` was made from (`split`)."""
    if cut.slot is None:
        return (cut.head + cut.tail).rstrip(b"\0")
    w = ChoiceWriter()
    cut.slot.spec.write(w, dict(cut.values), value, cut.slot.nested)
    return (cut.head + b"".join(w.parts) + cut.tail).rstrip(b"\0")


def json_kind(obj: object) -> str:
    """What a parsed JSON value is, in JSON's words ("got NoneType" named a Python type for a `null`)."""
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return f"{str(obj).lower()} (a boolean)"
    kinds = ((str, "a string"), (int | float, "a number"), (list, "an array [...]"))
    return next((k for t, k in kinds if isinstance(obj, t)), type(obj).__name__)


def load_dict(obj: Any) -> Scenario:
    """A scenario from parsed JSON; every bad field raises `ScenarioError` naming it."""
    if not isinstance(obj, Mapping):
        raise ScenarioError("<root>", f"expected a JSON object {{...}}, got {json_kind(obj)}")
    protocol = obj.get("protocol", "deepep_v2_dispatch")
    preset = obj.get("preset", "spec")
    if not isinstance(protocol, str):
        raise ScenarioError("protocol", "expected a string")
    if not isinstance(preset, str):
        raise ScenarioError("preset", "expected a string")
    scn: Scenario = _plan_for(protocol, preset).load("", obj, {})  # raises for unknown names
    return scn


def load_json(text: str | bytes) -> Scenario:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ScenarioError("<root>", f"invalid JSON: {e}") from None
    return load_dict(obj)
