"""A (protocol, preset) decode plan compiled to one straight-line Python function.

The fuzzer decodes every input, and walking the plan costs three calls per field
(slot -> spec.draw -> draw_int -> ChoiceReader.draw) plus one per section. The
compiled function does the same draws in the same order with the bounds that do
not depend on other fields baked in as constants, sections inlined, and pinned
values as constants; fields whose bounds depend on earlier fields (`hi_from`,
`hi_fn`, `len_from`), log-scale ints and lists still call their spec's `draw`,
so the bytes -> scenario mapping is exactly the plan's (tests/scenario check the
round trip, bench/equivalence.py the emulator on top).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from epfuzz.choices import ChoiceReader
from epfuzz.fields import BoolField, ChoiceField, FieldSpec, IntField, SectionField, Values


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

    def const(self, value: Any) -> str:
        name = f"k{len(self.env)}"
        self.env[name] = value
        return name

    def var(self) -> str:
        return f"v{len(self.lines)}"


def _expr(src: _Source, s: SlotLike, free: object) -> str:
    """The expression that yields slot `s`'s value (sections: the name of the built object)."""
    spec = s.spec
    if s.fixed is not free:
        return src.const(s.fixed)
    if isinstance(spec, SectionField):
        return _emit(src, s.nested, free)
    if isinstance(spec, BoolField):
        return "(draw(0, 1) != 0)"
    if isinstance(spec, ChoiceField):
        return f"{src.const(spec.options)}[draw(0, {len(spec.options) - 1})]"
    if isinstance(spec, IntField) and not spec.log and spec.hi_fn is None and spec.hi_from is None:
        return f"draw({spec.lo}, {spec.hi})"
    return f"{src.const(spec)}.draw(r, values, {src.const(s.nested)})"


def _emit(src: _Source, plan: PlanLike, free: object) -> str:
    """Append the lines that decode one instance of `plan.cls`; the variable holding it."""
    args = []
    for s in plan.slots:
        v = src.var()
        src.lines.append(f"    {v} = {_expr(src, s, free)}")
        src.lines.append(f"    values[{s.path!r}] = {v}")
        args.append(f"{s.name}={v}")
    obj = src.var()
    src.lines.append(f"    {obj} = {src.const(plan.cls)}({', '.join(args)})")
    return obj


def compile_plan(plan: PlanLike, free: object) -> Decoder:
    """The decoder of `plan` (`free` marks a slot that is not pinned)."""
    src = _Source()
    src.lines.append("    draw = r.draw")
    result = _emit(src, plan, free)
    code = "def decode(r, values):\n" + "\n".join(src.lines) + f"\n    return {result}\n"
    namespace = dict(src.env)
    exec(compile(code, f"<decoder {plan.cls.__name__}>", "exec"), namespace)  # noqa: S102 - our own source
    fn: Decoder = namespace["decode"]
    return fn
