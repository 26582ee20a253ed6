"""A faster `__init__` for the IR's frozen, slotted dataclasses, with the same signature and effect.

A frozen dataclass's generated `__init__` stores each field with `object.__setattr__(self, "name",
value)`: a global lookup, an attribute lookup and a generic set that finds the slot by name, per
field. A fresh scenario makes dozens of these objects (its decoded sections and overtakes, its
protocol's ops per epoch, the receiver's consumes): about a tenth of a fresh `dispatch_any` run was
their `__init__` (issue 31, perf). `fast_init` swaps in one that stores each field through its slot's
own descriptor (`member.__set__`, what the generic set ends up calling), the same bypass of the
frozen `__setattr__` the generated one makes, in about half the time.

`checked=True` (the ops of `epfuzz.ir.ops` and a receiver's `Consume`, which plug-ins make) also holds each
field annotated `int` or `bool` to its type (`as_int`, `as_flag`): the compiled core reads those fields as
native ints and bools and refused a value of another type (an int where the field is a bool: a TypeError deep
in the emulator) where the pure one ran it. A value of the type costs one identity
or type test; an integer (a numpy one too) is taken for an int, 0 and 1 for False and True, anything else is
refused here with a TypeError naming the class and field. A dataclass subclass's generated `__init__` calls
the `__post_init__` put on the class, which holds the class's own fields to the same rule.

It refuses (TypeError, at import) any class it cannot reproduce exactly: not a dataclass, not
frozen, no slots, a `__post_init__`, an `InitVar`, a field left out of `__init__`, a
`default_factory` or keyword-only field. The new `__init__` has the generated one's signature
(names, order, defaults, annotations): checked when it is made.
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
from collections.abc import Callable
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


def as_int(value: object, owner: str, field: str) -> int:
    """`value` for the int field `owner.field`: an int as itself, any other integer (a bool, a numpy int) as
    the int it stands for; anything else (a float, None, a string) a TypeError."""
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{owner}.{field} must be an int, not {value!r}") from None


def as_flag(value: object, owner: str, field: str) -> bool:
    """`value` for the bool field `owner.field`: True and False as themselves, an integer 0 or 1 (a numpy
    bool too) as False or True; anything else (2, None, a string) a TypeError."""
    if value is True or value is False:
        return value
    tp = type(value)
    if tp.__module__ == "numpy" and tp.__name__ in ("bool", "bool_"):
        return bool(value)
    try:
        i = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        i = -1
    if i == 0 or i == 1:
        return i == 1
    raise TypeError(f"{owner}.{field} must be a bool (True or False; 0 and 1 are taken for them), not {value!r}")


#: per annotation a checked field may have: the test a value of the type passes (`{v}` the name) and its rule.
#: A str field (a region) is not held here: one that is no string is named by the op check on both paths as the
#: op outside the layout (`epfuzz.sim.built._post`, tests/zoo/test_opcheck.py)
_RULES: dict[str, tuple[str, Callable[[object, str, str], object]]] = {
    "int": ("type({v}) is not _int", as_int), "bool": ("{v} is not True and {v} is not False", as_flag)}


def _rule(f: dataclasses.Field[Any]) -> tuple[str, Callable[[object, str, str], object]] | None:
    return _RULES.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""))


def _post_init(cls: type, fields: list[dataclasses.Field[Any]]) -> Callable[[Any], None]:
    """The `__post_init__` a dataclass subclass's generated `__init__` calls: `cls`'s checked fields held to
    their rules in place (as the checked `__init__` holds them)."""
    rules = [(f.name, r[1]) for f in fields if (r := _rule(f)) is not None]

    def __post_init__(self: Any) -> None:
        owner = type(self).__name__
        for name, rule in rules:
            v = getattr(self, name)
            w = rule(v, owner, name)
            if w is not v:
                object.__setattr__(self, name, w)

    __post_init__.__qualname__ = f"{cls.__qualname__}.__post_init__"
    return __post_init__


def fast_init(cls: T, checked: bool = False) -> T:
    """Give `cls` (a frozen, slotted dataclass) the faster `__init__`; returns `cls`. `checked`: its int and bool
    fields held to their types (the module's docstring)."""
    fields = _check(cls)
    env: dict[str, Any] = {"_int": int}
    params, body = [], []
    for i, f in enumerate(fields):
        env[f"_set{i}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            env[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
        rule = _rule(f) if checked else None
        if rule is not None:
            env[f"_rule{i}"] = rule[1]
            body.append(f"    if {rule[0].format(v=f.name)}: {f.name} = _rule{i}({f.name}, {cls.__name__!r}, "
                        f"{f.name!r})")
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
    if checked:  # after `_check`, which refuses a class with one
        type.__setattr__(cls, "__post_init__", _post_init(cls, fields))
    return cls


def checked_init(cls: T) -> T:
    """`fast_init(cls, checked=True)`, as a decorator."""
    return fast_init(cls, checked=True)
