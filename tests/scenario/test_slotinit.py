"""`epfuzz.ir.slotinit.fast_init`: the IR's frozen dataclasses built by a faster `__init__` (issue 31) are the
objects the generated one builds (of values of their fields' types, where the class is checked), with the same
signature, and a class it cannot reproduce is refused."""

from __future__ import annotations

import dataclasses
import inspect
import random
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest

from epfuzz.ir import ops, scenario
from epfuzz.ir.slotinit import fast_init
from epfuzz.protocols.base import Consume

FAST = [c for c in vars(ops).values() if isinstance(c, type) and dataclasses.is_dataclass(c)] + [
    scenario.Chunking, scenario.Payload, scenario.Topology, scenario.Signal, scenario.Knobs, scenario.SpinFault,
    scenario.Faults, scenario.Gpu, scenario.Overtake, Consume]


def _generated(cls: type) -> type:
    """The same class made again by `dataclass` alone: the generated `__init__` to compare with."""
    ns = {"__annotations__": dict(cls.__annotations__), "__module__": cls.__module__}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            ns[f.name] = f.default
    return dataclass(frozen=True, slots=True)(type(cls.__name__, (), ns))


#: the classes whose int, bool and str fields are held to their types (`fast_init(checked=True)`:
#: tests/sim/test_op_field_types.py); the others store whatever they are given
CHECKED = [c for c in FAST if c.__module__ == ops.__name__] + [Consume]


def _value(rng: random.Random, default: Any, annotation: str | None = None) -> Any:
    kind = {"int": 0, "str": 1, "bool": 2}.get(annotation or "", rng.randrange(4))
    return [rng.randrange(-5, 1 << 40), f"s{rng.randrange(9)}", rng.random() < 0.5,
            tuple(rng.randrange(9) for _ in range(rng.randrange(3))), default][kind if kind < 3 else 4]


def test_every_ir_class_has_the_fast_init_with_the_generated_signature() -> None:
    ops_classes = {c for c in FAST if c.__module__ == ops.__name__}
    assert set(ops.WR_OPS) | set(ops.GPU_OPS) | {ops.Spin, ops.Flush} <= ops_classes
    for cls in FAST:
        init = cls.__dict__["__init__"]
        assert init.__code__.co_filename.startswith("<fast_init"), cls
        assert inspect.signature(init) == inspect.signature(_generated(cls).__init__), cls
        assert init.__qualname__ == f"{cls.__qualname__}.__init__"


def test_fast_init_builds_what_the_generated_init_builds() -> None:
    """Random field values, positional and by keyword, defaults left out: every field holds what the generated
    `__init__` stores, the objects compare, hash and print alike, and stay frozen."""
    rng = random.Random(31)
    for cls in FAST:
        ref = _generated(cls)
        fields = dataclasses.fields(cls)
        for _ in range(40):
            args = [_value(rng, f.default if f.default is not dataclasses.MISSING else 0,
                           str(f.type) if cls in CHECKED else None) for f in fields]
            cut = rng.randrange(len(fields) + 1)
            need = [i for i, f in enumerate(fields) if f.default is dataclasses.MISSING]
            cut = max(cut, need[-1] + 1 if need else 0)
            kw = {f.name: a for f, a in zip(fields[cut:], args[cut:]) if rng.random() < 0.6}
            got, want = cls(*args[:cut], **kw), ref(*args[:cut], **kw)
            assert [getattr(got, f.name) for f in fields] == [getattr(want, f.name) for f in fields]
            assert repr(got).split("(", 1)[1] == repr(want).split("(", 1)[1]
            assert got == dataclasses.replace(got) and hash(got) == hash(dataclasses.replace(got))
            for f in fields[:1]:
                with pytest.raises(dataclasses.FrozenInstanceError):
                    setattr(got, f.name, 1)
        with pytest.raises(TypeError) as fast_err:
            cls(*range(len(fields) + 1))
        with pytest.raises(TypeError) as ref_err:
            ref(*range(len(fields) + 1))
        assert str(fast_err.value).split("(", 1)[1] == str(ref_err.value).split("(", 1)[1]


def _unlike_the_ir() -> dict[str, type]:
    """Dataclasses unlike the IR's, by what sets them apart (each test says what it makes of which)."""

    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(slots=True)
    class NotFrozen:
        x: int

    @dataclass(frozen=True, slots=True)
    class PostInit:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        x: int
        y: InitVar[int] = 0

    @dataclass(frozen=True, slots=True)
    class Factory:
        x: tuple[int, ...] = field(default_factory=tuple)

    @dataclass(frozen=True, slots=True)
    class KwOnly:
        x: int = field(default=0, kw_only=True)

    @dataclass(frozen=True, slots=True)
    class NoInit:
        x: int = field(default=0, init=False)

    return {c.__name__: c for c in (NoSlots, NotFrozen, PostInit, WithInitVar, Factory, KwOnly, NoInit)}


def test_a_class_it_cannot_reproduce_is_refused() -> None:
    for cls in [*_unlike_the_ir().values(), int]:
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)


def test_settable_fields_are_the_init_parameters_of_plain_frozen_dataclasses_only() -> None:
    """`settable_fields` (what the compiled decoder makes sections by, without their `__init__`): the fields in
    order for the IR's classes (a default factory included: the decoder passes every field), None for every
    class whose instance is not `object.__new__` plus one set per field."""
    from epfuzz.ir.slotinit import settable_fields

    for cls in FAST + [scenario.Scenario]:
        # a checked class's instance is more than its sets: its `__init__` holds the values to their types
        assert settable_fields(cls) == (None if cls in CHECKED else tuple(f.name for f in dataclasses.fields(cls))), cls

    @dataclass(frozen=True, slots=True)
    class OwnInit:
        x: int

    def init(self: Any, x: int) -> None:
        object.__setattr__(self, "x", x + 1)

    OwnInit.__init__ = init  # type: ignore[method-assign]

    unlike = _unlike_the_ir()
    for name, cls in [*unlike.items(), ("OwnInit", OwnInit), ("int", int)]:
        # a default factory fills only a field left out, and the decoder leaves out none
        assert settable_fields(cls) == (("x",) if name == "Factory" else None), name
