"""Typed field specs: each scenario field states its kind and bounds once, here.

The byte decoder, the byte encoder and the JSON loader all need per-kind
behaviour (how to draw an int on a log scale, how to check a choice). Putting
that behaviour on one small class per kind makes it a single method dispatch,
so adding a kind cannot leave one of the three walkers behind; the walkers in
`epfuzz.encoding.codec` only recurse and hold pinned fields fixed.

A bound may depend on a field decoded earlier (`hi_from`, `len_from`, `hi_fn`):
the walkers pass `values`, the dotted paths decoded so far, for that.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from epfuzz.infra.errors import ScenarioError
from epfuzz.ir.choices import ChoiceReader, ChoiceWriter

Values = dict[str, Any]
_SPEC = "spec"


class Kind(StrEnum):
    NAME = "name"
    INT = "int"
    BOOL = "bool"
    CHOICE = "choice"
    INTS = "ints"
    ITEMS = "items"
    SECTION = "section"


class Nested(Protocol):
    """How the codec reads and writes one nested dataclass: a section, or one item of a list."""

    def decode(self, r: ChoiceReader, values: Values) -> Any: ...

    def encode(self, w: ChoiceWriter, values: Values, obj: Any) -> None: ...

    def load(self, prefix: str, raw: Any, values: Values) -> Any: ...


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field's schema. `nested` is the codec of the field's class (sections and items only)."""

    kind: ClassVar[Kind]

    def default(self) -> Any:
        raise NotImplementedError

    def json_default(self) -> Any:
        """What an absent JSON key means."""
        return self.default()

    def draw(self, r: ChoiceReader, values: Values, nested: Nested | None) -> Any:
        raise NotImplementedError(f"{self.kind} fields are pinned by the codec, never drawn")

    def write(self, w: ChoiceWriter, values: Values, v: Any, nested: Nested | None) -> None:
        raise NotImplementedError(f"{self.kind} fields are pinned by the codec, never written")

    def check(self, path: str, raw: Any, values: Values, nested: Nested | None) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class NameField(FieldSpec):
    """A registry name (protocol, preset): chosen by the caller, so it takes no bytes."""

    kind: ClassVar[Kind] = Kind.NAME
    value: str = ""

    def default(self) -> str:
        return self.value

    def check(self, path: str, raw: Any, values: Values, nested: Nested | None) -> str:
        if not isinstance(raw, str):
            raise ScenarioError(path, "expected a string")
        return raw


def _mantissa_range(lo: int, hi: int, bits: int) -> tuple[int, int]:
    """Values with this bit length, within [lo, hi], as offsets from 2**(bits-1)."""
    if bits == 0:
        return 0, 0
    base = 1 << (bits - 1)
    return max(lo, base) - base, min(hi, 2 * base - 1) - base


def draw_int(r: ChoiceReader, lo: int, hi: int, log: bool) -> int:
    """Log-scale fields draw a bit length, then the value within it: small sizes are as
    likely as large ones, which keeps typical runs cheap while 16 KiB stays reachable."""
    if not log:
        return r.draw(lo, hi)
    bits = r.draw(lo.bit_length(), hi.bit_length())
    mlo, mhi = _mantissa_range(lo, hi, bits)
    return ((1 << (bits - 1)) if bits else 0) + r.draw(mlo, mhi)


def write_int(w: ChoiceWriter, lo: int, hi: int, log: bool, v: int) -> None:
    if not log:
        w.write(lo, hi, v)
        return
    if not lo <= v <= hi:
        raise ValueError(f"{v} outside [{lo}, {hi}]")
    bits = v.bit_length()
    w.write(lo.bit_length(), hi.bit_length(), bits)
    mlo, mhi = _mantissa_range(lo, hi, bits)
    w.write(mlo, mhi, v - ((1 << (bits - 1)) if bits else 0))


def check_int(path: str, v: Any, lo: int, hi: int, why: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScenarioError(path, f"expected an integer, got {json.dumps(v)}")
    if not lo <= v <= hi:
        raise ScenarioError(path, f"{v} is out of range [{lo}, {hi}]{why}")
    return v


def bound_reason(own_hi: int, hi: int, hi_from: str | None, hi_fn: Any, values: Mapping[str, Any]) -> str:
    """Why the upper bound is lower than the field's own: the field (or rule) that sets it, so a
    user who wrote 64 tokens learns which other field to change."""
    if hi >= own_hi:
        return ""
    if hi_fn is not None:
        return f" ({' '.join((hi_fn.__doc__ or 'bounded by other fields').split())})"
    return f" (bounded by {hi_from} = {values[hi_from]})" if hi_from else ""


def _check_list(path: str, raw: Any, max_len: int) -> list[Any] | tuple[Any, ...]:
    if not isinstance(raw, (list, tuple)):
        raise ScenarioError(path, f"expected a list, got {json.dumps(raw)}")
    if len(raw) > max_len:
        raise ScenarioError(path, f"{len(raw)} entries, at most {max_len} allowed")
    return raw


@dataclass(frozen=True, slots=True)
class IntField(FieldSpec):
    """An integer in [lo, hi]; `hi_from` caps hi below an earlier field, `hi_fn` computes it."""

    kind: ClassVar[Kind] = Kind.INT
    lo: int = 0
    hi: int = 0
    doc: str = ""
    hi_from: str | None = None
    log: bool = False
    hi_fn: Callable[[Mapping[str, Any]], int] | None = None

    def default(self) -> int:
        return self.lo

    def hi_for(self, values: Mapping[str, Any]) -> int:
        if self.hi_fn is not None:
            return max(self.lo, min(self.hi, self.hi_fn(values)))
        if self.hi_from is None:
            return self.hi
        return min(self.hi, int(values[self.hi_from]) - 1)

    def draw(self, r: ChoiceReader, values: Values, nested: Nested | None) -> int:
        return draw_int(r, self.lo, self.hi_for(values), self.log)

    def write(self, w: ChoiceWriter, values: Values, v: int, nested: Nested | None) -> None:
        write_int(w, self.lo, self.hi_for(values), self.log, v)

    def check(self, path: str, raw: Any, values: Values, nested: Nested | None) -> int:
        hi = self.hi_for(values)
        return check_int(path, raw, self.lo, hi, bound_reason(self.hi, hi, self.hi_from, self.hi_fn, values))


@dataclass(frozen=True, slots=True)
class BoolField(FieldSpec):
    kind: ClassVar[Kind] = Kind.BOOL
    doc: str = ""

    def default(self) -> bool:
        return False

    def draw(self, r: ChoiceReader, values: Values, nested: Nested | None) -> bool:
        return bool(r.draw(0, 1))

    def write(self, w: ChoiceWriter, values: Values, v: bool, nested: Nested | None) -> None:
        w.write(0, 1, int(v))

    def check(self, path: str, raw: Any, values: Values, nested: Nested | None) -> bool:
        if not isinstance(raw, bool):
            raise ScenarioError(path, f"expected true or false, got {json.dumps(raw)}")
        return raw


@dataclass(frozen=True, slots=True)
class ChoiceField(FieldSpec):
    """One of `options`; the first is the simplest (and the default)."""

    kind: ClassVar[Kind] = Kind.CHOICE
    options: tuple[Any, ...] = ()
    doc: str = ""

    def default(self) -> Any:
        return self.options[0]

    def draw(self, r: ChoiceReader, values: Values, nested: Nested | None) -> Any:
        return self.options[r.draw(0, len(self.options) - 1)]

    def write(self, w: ChoiceWriter, values: Values, v: Any, nested: Nested | None) -> None:
        w.write(0, len(self.options) - 1, self.options.index(v))

    def check(self, path: str, raw: Any, values: Values, nested: Nested | None) -> Any:
        if raw not in self.options or isinstance(raw, bool):
            raise ScenarioError(path, f"{json.dumps(raw)} is not one of {list(self.options)}")
        return raw


@dataclass(frozen=True, slots=True)
class IntsField(FieldSpec):
    """A tuple of ints; `len_from` caps its length at an earlier field, `hi_from` as for IntField."""

    kind: ClassVar[Kind] = Kind.INTS
    lo: int = 0
    hi: int = 0
    max_len: int = 0
    doc: str = ""
    len_from: str | None = None
    hi_from: str | None = None
    log: bool = False

    def default(self) -> tuple[int, ...]:
        return ()

    def len_for(self, values: Mapping[str, Any]) -> int:
        return self.max_len if self.len_from is None else min(self.max_len, int(values[self.len_from]))

    def hi_for(self, values: Mapping[str, Any]) -> int:
        return self.hi if self.hi_from is None else min(self.hi, int(values[self.hi_from]) - 1)

    def draw(self, r: ChoiceReader, values: Values, nested: Nested | None) -> tuple[int, ...]:
        n = r.draw(0, self.len_for(values))
        hi = self.hi_for(values)
        return tuple(draw_int(r, self.lo, hi, self.log) for _ in range(n))

    def write(self, w: ChoiceWriter, values: Values, v: tuple[int, ...], nested: Nested | None) -> None:
        w.write(0, self.len_for(values), len(v))
        hi = self.hi_for(values)
        for x in v:
            write_int(w, self.lo, hi, self.log, x)

    def check(self, path: str, raw: Any, values: Values, nested: Nested | None) -> tuple[int, ...]:
        items = _check_list(path, raw, self.len_for(values))
        hi = self.hi_for(values)
        why = bound_reason(self.hi, hi, self.hi_from, None, values)
        return tuple(check_int(f"{path}[{i}]", x, self.lo, hi, why) for i, x in enumerate(items))


@dataclass(frozen=True, slots=True)
class ItemsField(FieldSpec):
    """A tuple of up to `max_len` instances of the dataclass `cls`."""

    kind: ClassVar[Kind] = Kind.ITEMS
    cls: type = object
    max_len: int = 0
    doc: str = ""

    def default(self) -> tuple[Any, ...]:
        return ()

    def draw(self, r: ChoiceReader, values: Values, nested: Nested | None) -> tuple[Any, ...]:
        assert nested is not None
        return tuple(nested.decode(r, values) for _ in range(r.draw(0, self.max_len)))

    def write(self, w: ChoiceWriter, values: Values, v: tuple[Any, ...], nested: Nested | None) -> None:
        assert nested is not None
        w.write(0, self.max_len, len(v))
        for item in v:
            nested.encode(w, values, item)

    def check(self, path: str, raw: Any, values: Values, nested: Nested | None) -> tuple[Any, ...]:
        assert nested is not None
        return tuple(nested.load(f"{path}.", x, values) for x in _check_list(path, raw, self.max_len))


@dataclass(frozen=True, slots=True)
class SectionField(FieldSpec):
    """A nested dataclass: a group of fields that takes no bytes of its own."""

    kind: ClassVar[Kind] = Kind.SECTION
    cls: type = object

    def default(self) -> Any:
        return self.cls()

    def json_default(self) -> Any:
        return {}

    def draw(self, r: ChoiceReader, values: Values, nested: Nested | None) -> Any:
        assert nested is not None
        return nested.decode(r, values)

    def write(self, w: ChoiceWriter, values: Values, v: Any, nested: Nested | None) -> None:
        assert nested is not None
        nested.encode(w, values, v)

    def check(self, path: str, raw: Any, values: Values, nested: Nested | None) -> Any:
        assert nested is not None
        return nested.load(f"{path}.", raw, values)


def declare(spec: FieldSpec) -> Any:
    """The dataclass field for `spec`: its default is the spec's simplest value."""
    if isinstance(spec, SectionField):
        return dataclasses.field(default_factory=spec.cls, metadata={_SPEC: spec})
    return dataclasses.field(default=spec.default(), metadata={_SPEC: spec})


def spec_of(f: dataclasses.Field[Any]) -> FieldSpec:
    spec = f.metadata[_SPEC]
    assert isinstance(spec, FieldSpec)
    return spec


def specs(cls: type) -> Iterator[tuple[str, FieldSpec]]:
    """(name, spec) of each field of the dataclass `cls`, in declaration (codec) order."""
    for f in dataclasses.fields(cls):
        yield f.name, spec_of(f)


def iter_leaves(cls: type, prefix: str = "") -> Iterator[tuple[str, FieldSpec]]:
    """Every leaf below `cls` as (dotted path, spec), in codec order; sections are entered, names skipped."""
    for name, spec in specs(cls):
        if isinstance(spec, SectionField):
            yield from iter_leaves(spec.cls, f"{prefix}{name}.")
        elif not isinstance(spec, NameField):
            yield f"{prefix}{name}", spec
