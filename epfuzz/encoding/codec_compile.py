"""A (protocol, preset) decode plan, and its encode walk, compiled to straight-line Python functions.

The fuzzer decodes every input, and walking the plan costs three calls per field
(slot -> spec.draw -> draw_int -> ChoiceReader.draw) plus one per section. The
compiled function does the same draws in the same order, inlined on a local
stream position: constant bounds baked in, bounds that depend on earlier fields
(`hi_from`, `hi_fn`) and log-scale ints computed in place, sections inlined,
pinned values as constants. Lists (`IntsField`, `ItemsField`) still call their
spec's `draw` (items through their own compiled plan). The bytes -> scenario
mapping is exactly the plan walk's (`_Plan.walk_decode`; tests/scenario compare
the two, bench/equivalence.py the emulator on top).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

from epfuzz.encoding import plancore
from epfuzz.ir.choices import ChoiceReader, ChoiceWriter, _width
from epfuzz.ir.fields import (
    BoolField,
    ChoiceField,
    FieldSpec,
    IntField,
    IntsField,
    ItemsField,
    SectionField,
    Values,
    draw_int,
    write_int,
)
from epfuzz.ir.slotinit import settable_fields


class SlotLike(Protocol):
    name: str
    path: str
    spec: FieldSpec
    fixed: Any
    nested: Any


class PlanLike(Protocol):
    cls: type
    slots: list[Any]


Decoder = Callable[[ChoiceReader, Values], Any]


class _Source:
    """The function body being written, and the constants it refers to by name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {}
        self.count = 0

    def const(self, value: Any) -> str:
        name = f"k{len(self.env)}"
        self.env[name] = value
        return name

    def var(self) -> str:
        self.count += 1
        return f"v{self.count}"


def _draw(lo: int, hi: int) -> str:
    """`ChoiceReader.draw(lo, hi)` with constant bounds, inlined on the local `pos` (the bytes it takes: "+ n")."""
    span = hi - lo + 1
    if span <= 1:
        return str(lo)
    if span <= 256:
        return f"{lo} + (data[pos] % {span} if pos < end else 0)  # +1"
    n = _width(span)
    return f"{lo} + int.from_bytes(data[pos:pos + {n}].ljust({n}, b'\\0'), 'big') % {span}  # +{n}"


def _dyn_draw(v: str, lo: str, hi: str) -> list[str]:
    """`ChoiceReader.draw(lo, hi)` with bounds known only at decode time (names of locals or constants)."""
    return [f"_s = {hi} - {lo} + 1",
            f"if _s <= 1: {v} = {lo}",
            f"elif _s <= 256: {v} = {lo} + (data[pos] % _s if pos < end else 0); pos += 1",
            f"else: r.pos = pos; {v} = draw({lo}, {hi}); pos = r.pos"]


def _int_lines(src: _Source, v: str, spec: IntField) -> list[str]:
    """An `IntField` draw (`fields.draw_int` over `IntField.hi_for`) as statements."""
    if spec.hi_fn is not None:
        hi = [f"_hi = max({spec.lo}, min({spec.hi}, {src.const(spec.hi_fn)}(values)))"]
    elif spec.hi_from is not None:
        hi = [f"_hi = min({spec.hi}, int(values[{spec.hi_from!r}]) - 1)"]
    else:
        hi = [f"_hi = {spec.hi}"]
    if not spec.log:
        return [*hi, *_dyn_draw(v, str(spec.lo), "_hi")]
    # log scale: a bit length, then the value within it (fields._mantissa_range)
    return [*hi, *_dyn_draw("_b", str(spec.lo.bit_length()), "_hi.bit_length()"),
            "if _b == 0: _mlo = _mhi = _base = 0",
            f"else: _base = 1 << (_b - 1); _mlo = max({spec.lo}, _base) - _base; "
            "_mhi = min(_hi, 2 * _base - 1) - _base",
            *_dyn_draw("_m", "_mlo", "_mhi"),
            f"{v} = _base + _m"]


def _slot_lines(src: _Source, v: str, s: SlotLike, free: object, indent: str = "    ") -> list[str]:
    """Statements that leave slot `s`'s value in `v` (a nested plan's own lines go to `src` at `indent`)."""
    spec = s.spec
    if s.fixed is not free:
        return [f"{v} = {src.const(s.fixed)}"]
    if isinstance(spec, SectionField):
        return [f"{v} = {_emit(src, s.nested, free, indent)}"]
    if isinstance(spec, ItemsField) and s.nested is not None:
        return _items_lines(src, v, spec, s.nested, free, indent)
    if isinstance(spec, IntsField):
        return _ints_lines(src, v, spec)
    if isinstance(spec, BoolField):
        expr = _draw(0, 1)
        return [f"{v} = ({expr.split('  #')[0]}) != 0; pos += 1"]
    if isinstance(spec, ChoiceField):
        expr, _, took = _draw(0, len(spec.options) - 1).partition("  # +")
        return [f"{v} = {src.const(spec.options)}[{expr}]" + (f"; pos += {took}" if took else "")]
    if isinstance(spec, IntField):
        if spec.log or spec.hi_fn is not None or spec.hi_from is not None:
            return _int_lines(src, v, spec)
        expr, _, took = _draw(spec.lo, spec.hi).partition("  # +")
        return [f"{v} = {expr}" + (f"; pos += {took}" if took else "")]
    return [f"r.pos = pos; {v} = {src.const(spec)}.draw(r, values, {src.const(s.nested)}); pos = r.pos"]


def _ints_lines(src: _Source, v: str, spec: IntsField) -> list[str]:
    """`IntsField.draw` inlined: the count (`len_for`), the bound (`hi_for`), then each element in a loop (no
    generator, no `draw_int` call per element). Every draw the list makes still goes through the reader's
    `draw`, as `IntsField.draw` makes them: `search.context.field_bounds` records the offsets of the draws a
    reader sees, and the guided search's trajectory depends on them (tests/search/test_trajectory.py)."""
    n, items, x = src.var(), src.var(), src.var()
    if spec.len_from is None:
        count = [f"r.pos = pos; {n} = draw(0, {spec.max_len}); pos = r.pos"]
    else:
        count = [f"r.pos = pos; {n} = draw(0, min({spec.max_len}, int(values[{spec.len_from!r}]))); pos = r.pos"]
    hi = f"_hi = {spec.hi}" if spec.hi_from is None else f"_hi = min({spec.hi}, int(values[{spec.hi_from!r}]) - 1)"
    element = (f"{x} = {src.const(draw_int)}(r, {spec.lo}, _hi, True)" if spec.log else f"{x} = draw({spec.lo}, _hi)")
    return [*count, hi, f"{items} = []", "r.pos = pos", f"for _ in range({n}):", f"    {element}",
            f"    {items}.append({x})", f"pos = r.pos; {v} = tuple({items})"]


def _items_lines(src: _Source, v: str, spec: ItemsField, nested: PlanLike, free: object, indent: str) -> list[str]:
    """`ItemsField.draw` inlined: the count, then a loop over the item plan's own lines (no call, generator
    step and nested plan call per item: a fresh scenario decodes ~7 overtakes, issue 31). The count is drawn
    through the reader's `draw`, as `ItemsField.draw` draws it (`_ints_lines` says why)."""
    n, items = src.var(), src.var()
    src.lines += [f"{indent}r.pos = pos; {n} = draw(0, {spec.max_len}); pos = r.pos", f"{indent}{items} = []",
                  f"{indent}for _ in range({n}):"]
    obj = _emit(src, nested, free, indent + "    ")
    src.lines.append(f"{indent}    {items}.append({obj})")
    return [f"{v} = tuple({items})"]


def _emit(src: _Source, plan: PlanLike, free: object, indent: str = "    ") -> str:
    """Append the lines that decode one instance of `plan.cls` at `indent`; the variable holding it."""
    args = []
    for s in plan.slots:
        v = src.var()
        src.lines += [f"{indent}{line}" for line in _slot_lines(src, v, s, free, indent)]
        src.lines.append(f"{indent}values[{s.path!r}] = {v}")
        args.append(v)
    obj = src.var()
    names = [s.name for s in plan.slots]
    if names != _positional(plan.cls):  # by keyword, unless the slots are __init__'s parameters in order
        args = [f"{name}={v}" for name, v in zip(names, args)]
    src.lines.append(f"{indent}{obj} = {src.const(plan.cls)}({', '.join(args)})")
    return obj


def _positional(cls: type) -> list[str]:
    """Every parameter of `cls(...)`, in order, where all may be passed by position (else none): a call that
    passes the slots by position (they are these parameters, in this order) costs less than by keyword (a
    fresh scenario constructs ~17 sections and overtakes, issue 31)."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no signature to read: by keyword
        return []
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params):
        return []
    return [p.name for p in params]


def compile_plan(plan: PlanLike, free: object) -> Decoder:
    """The decoder of `plan` (`free` marks a slot that is not pinned)."""
    src = _Source()
    src.lines.append("    draw, data, pos = r.draw, r.data, r.pos")
    src.lines.append("    end = len(data)")
    result = _emit(src, plan, free)
    code = "def decode(r, values):\n" + "\n".join(src.lines) + f"\n    r.pos = pos\n    return {result}\n"
    namespace = dict(src.env)
    exec(compile(code, f"<decoder {plan.cls.__name__}>", "exec"), namespace)  # noqa: S102 - our own source
    fn: Decoder = namespace["decode"]
    return fn


# ---------------------------------------------------------------- the encoder

Encoder = Callable[[ChoiceWriter, Values, Any], None]

#: one-byte draws as bytes objects, so that a one-byte write appends a shared constant
_BYTE = tuple(bytes([i]) for i in range(256))


def _put(lo: int, hi: int, x: str) -> list[str]:
    """`ChoiceWriter.write(lo, hi, x)` with constant bounds, inlined (`x` names a local int)."""
    span = hi - lo + 1
    if span <= 1:
        return []
    check = f"if not {lo} <= {x} <= {hi}: raise ValueError(f'{{{x}}} outside [{lo}, {hi}]')"
    if span <= 256:
        return [check, f"append(_BYTE[{x} - {lo}])"]
    return [check, f"append(({x} - {lo}).to_bytes({_width(span)}, 'big'))"]


def _write_lines(src: _Source, v: str, s: SlotLike) -> list[str]:
    """Statements that write slot `s`'s value `v` as its spec's `write` does."""
    spec = s.spec
    if isinstance(spec, BoolField):
        return ["_x = int(" + v + ")", *_put(0, 1, "_x")]
    if isinstance(spec, ChoiceField):
        lines = [f"_x = {src.const(spec.options)}.index({v})"]  # raises for a value not among the options
        n = len(spec.options)
        return lines + (["append(_BYTE[_x])"] if 1 < n <= 256 else _put(0, n - 1, "_x"))
    if isinstance(spec, IntField):
        if not (spec.log or spec.hi_fn is not None or spec.hi_from is not None):
            return _put(spec.lo, spec.hi, v)
        if spec.hi_fn is not None:
            hi = f"max({spec.lo}, min({spec.hi}, {src.const(spec.hi_fn)}(values)))"
        elif spec.hi_from is not None:
            hi = f"min({spec.hi}, int(values[{spec.hi_from!r}]) - 1)"
        else:
            hi = str(spec.hi)
        return [f"write_int(w, {spec.lo}, {hi}, {spec.log}, {v})"]
    return [f"{src.const(spec)}.write(w, values, {v}, {src.const(s.nested)})"]


def _emit_encode(src: _Source, plan: PlanLike, obj: str, free: object) -> None:
    """Append the lines that write the instance `obj` of `plan.cls` (sections inlined)."""
    for s in plan.slots:
        v = src.var()
        src.lines.append(f"    {v} = {obj}.{s.name}")
        src.lines.append(f"    values[{s.path!r}] = {v}")
        if s.fixed is not free:
            continue
        if isinstance(s.spec, SectionField):
            _emit_encode(src, s.nested, v, free)
        else:
            src.lines += [f"    {line}" for line in _write_lines(src, v, s)]


def compile_encoder(plan: PlanLike, free: object) -> Encoder:
    """The encoder of `plan`: `_Plan.encode`'s slot walk as straight-line code, writing the same bytes
    (constant bounds baked in, one-byte writes as shared constants, sections inlined) and raising the
    same `ValueError` for a value out of its field's range. The guided search encodes every mutant."""
    src = _Source()
    src.lines.append("    append = w.parts.append")
    _emit_encode(src, plan, "obj", free)
    code = "def encode(w, values, obj):\n" + "\n".join(src.lines) + "\n"
    namespace = {**src.env, "_BYTE": _BYTE, "write_int": write_int}
    exec(compile(code, f"<encoder {plan.cls.__name__}>", "exec"), namespace)  # noqa: S102 - our own source
    fn: Encoder = namespace["encode"]
    return fn


# ---------------------------------------------------------------- the compiled decoder's program

def compile_program(plan: PlanLike, free: object) -> plancore.Program:
    """`plan` as the data of `plancore`'s decode loop: a step per slot, nested plans as nested programs.

    A spec is read as one of the loop's kinds only where it is exactly that built-in class (a subclass may
    draw otherwise): any other is drawn by its own `draw` (`plancore.SPEC`), as the plan walk draws it."""
    steps = [_step(s, free) for s in plan.slots]
    names = [s.name for s in plan.slots]
    positional = names == _positional(plan.cls)
    fields = settable_fields(plan.cls)
    return plancore.Program(plan.cls, steps, None if positional else tuple(names),
                            fields if positional and fields == tuple(names) else None)


def _step(s: SlotLike, free: object) -> plancore.Step:
    spec, path = s.spec, s.path
    if s.fixed is not free:
        return plancore.Step(plancore.FIXED, path, fixed=s.fixed)
    kind = type(spec)
    if kind is SectionField and s.nested is not None:
        return plancore.Step(plancore.SECTION, path, nested=compile_program(s.nested, free))
    if kind is ItemsField and s.nested is not None:
        assert isinstance(spec, ItemsField)
        return plancore.Step(plancore.ITEMS, path, max_len=spec.max_len, nested=compile_program(s.nested, free))
    if kind is IntField:
        assert isinstance(spec, IntField)
        return plancore.Step(plancore.LOG if spec.log else plancore.INT, path, lo=spec.lo, hi=spec.hi,
                             hi_from=spec.hi_from, hi_fn=spec.hi_fn)
    if kind is IntsField:
        assert isinstance(spec, IntsField)
        return plancore.Step(plancore.INTS, path, lo=spec.lo, hi=spec.hi, log=spec.log, hi_from=spec.hi_from,
                             len_from=spec.len_from, max_len=spec.max_len)
    if kind is BoolField:
        return plancore.Step(plancore.BOOL, path)
    if kind is ChoiceField:
        assert isinstance(spec, ChoiceField)
        return plancore.Step(plancore.CHOICE, path, options=spec.options)
    return plancore.Step(plancore.SPEC, path, spec=spec, spec_nested=s.nested)
