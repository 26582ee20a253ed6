"""A `Consume` made from compiled code without its plain-Python `__init__`: what the built-in receivers
compiled with the core (`epfuzz.core.native.COMPILED`) make their accepts with (`epfuzz.ir.opmake` does the
same for the senders' ops, and says why).

A call of `Consume` from compiled code goes through the type's call, `slot_tp_init` and the class's
interpreted `__init__` (`epfuzz.ir.slotinit`): about 5,100 instructions per accept under callgrind, one or
two accepts per execution of a schedule on the DeepEP #661 shape (issue 31). Compiled, `consume` is
`object.__new__` and one `PyObject_GenericSetAttr` per field, bypassing the frozen `__setattr__` exactly as
the dataclass's own `__init__` does.

It makes the object `Consume` makes from the same arguments: same class, every field set, equal, same hash,
repr and pickle (tests/zoo/test_consmake.py, against `dataclasses.fields`, so that a field added to
`Consume` fails there until `consume` sets it). Plug-in receivers keep making `Consume` objects.
"""

from __future__ import annotations

from typing import Final

from epfuzz.protocols.base import Consume

# Final: mypyc keeps each in a C static, where a plain module name is a dict lookup per use
_new: Final = object.__new__
_CONSUME: Final = Consume


def consume(region: str, offset: int, length: int, channel: int, what: str, invalidate: bool = False) -> Consume:
    o: Consume = _new(_CONSUME)
    object.__setattr__(o, "region", region)
    object.__setattr__(o, "offset", offset)
    object.__setattr__(o, "length", length)
    object.__setattr__(o, "channel", channel)
    object.__setattr__(o, "what", what)
    object.__setattr__(o, "invalidate", invalidate)
    return o
