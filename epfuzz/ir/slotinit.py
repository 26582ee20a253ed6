"""A faster `__init__` for the IR's frozen, slotted dataclasses, with the same signature and effect.

A frozen dataclass's generated `__init__` stores each field with `object.__setattr__(self, "name",
value)`: a global lookup, an attribute lookup and a generic set that finds the slot by name, per
field. A fresh scenario makes dozens of these objects (its decoded sections and overtakes, its
protocol's ops per epoch, the receiver's consumes): about a tenth of a fresh `dispatch_any` run was
their `__init__` (issue 31, perf). `fast_init` swaps in one that stores each field through its slot's
own descriptor (`member.__set__`, what the generic set ends up calling), the same bypass of the
frozen `__setattr__` the generated one makes, in about half the time.

It refuses (TypeError, at import) any class it cannot reproduce exactly: not a dataclass, not
frozen, no slots, a `__post_init__`, an `InitVar`, a field left out of `__init__`, a
`default_factory` or keyword-only field. The new `__init__` has the generated one's signature
(names, order, defaults, annotations): checked when it is made.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def _check(cls: type) -> list[dataclasses.Field[Any]]:
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen dataclass")
    if "__slots__" not in cls.__dict__:
        raise TypeError(f"fast_init: {cls.__name__} has no slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init: {cls.__name__} has a __post_init__")
    fields = dataclasses.fields(cls)  # an InitVar is none of these, but a parameter of __init__
    names = list(inspect.signature(cls.__dict__["__init__"]).parameters)[1:]
    if names != [f.name for f in fields]:
        raise TypeError(f"fast_init: {cls.__name__}'s __init__ takes {names}, not its fields (an InitVar?)")
    for f in fields:
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"fast_init: {cls.__name__}.{f.name} is not a plain init field")
    return list(fields)


def settable_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of `cls` in order where making an instance from a value for every one of them is
    `object.__new__` and one `object.__setattr__` per field, exactly what its `__init__` does (else None).

    That holds for a frozen, slotted dataclass whose `__init__` is the generated one or `fast_init`'s, with no
    `__post_init__` and no `InitVar`, every field an `__init__` parameter taken by position: a default or a
    default factory only fills a value the caller left out, and such a caller leaves out none. The
    compiled decoder makes a fresh scenario's sections and overtakes so (`epfuzz.encoding.plancore`): the
    call of the class, its `slot_tp_init` and the interpreted `__init__` cost ~4,000 instructions an object,
    a fifth of decoding a short input (issue 31, callgrind)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        return None
    init = cls.__dict__.get("__init__")
    if init is None or getattr(init, "__qualname__", "") != f"{cls.__qualname__}.__init__":
        return None  # an inherited or replaced __init__: not the one these fields describe
    fields = dataclasses.fields(cls)
    names = list(inspect.signature(init).parameters)[1:]
    if names != [f.name for f in fields] or any(not f.init or f.kw_only for f in fields):
        return None
    return tuple(names)


def fast_init(cls: T) -> T:
    """Give `cls` (a frozen, slotted dataclass) the faster `__init__`; returns `cls`."""
    fields = _check(cls)
    env: dict[str, Any] = {}
    params, body = [], []
    for i, f in enumerate(fields):
        env[f"_set{i}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            env[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
        body.append(f"    _set{i}(self, {f.name})")
    src = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(compile(src, f"<fast_init {cls.__qualname__}>", "exec"), env)  # noqa: S102 - our own source
    new = env["__init__"]
    old = cls.__dict__["__init__"]
    new.__qualname__ = f"{cls.__qualname__}.__init__"
    new.__module__ = cls.__module__
    new.__annotations__ = dict(old.__annotations__)
    if inspect.signature(new) != inspect.signature(old):
        raise TypeError(f"fast_init: {cls.__name__}: {inspect.signature(new)} != {inspect.signature(old)}")
    type.__setattr__(cls, "__init__", new)
    return cls
