"""An op's (and a receiver's `Consume`'s) int and bool fields hold values of their types, by one rule on both
paths (`epfuzz.ir.slotinit.as_int`, `as_flag`): an integer is an int (a numpy one, a bool), 0 and 1
are False and True where the field is a bool, anything else is refused where the op is made, a TypeError naming
the class and field. The compiled core reads these fields as native values: before, `Flush(qp, 1)` or `fence=0`
ran on the pure path and raised `TypeError: bool object expected; got int` deep in the compiled one.

Every op class, a plug-in's dataclass subclass of it and an op of no known class, times values of every kind:
the field holds the value the rule says, of exactly its type, or the op is refused; run in a plug-in's sender, the
op with an integer for its bool runs as the op with the bool does; and the two paths answer the same (a child
process on each path)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epfuzz.core import native
from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols.base import Consume
from epfuzz.protocols.dispatch import DispatchProtocol
from epfuzz.sim.built import build_form
from epfuzz.sim.engine import simulate_over

ROOT = Path(__file__).resolve().parents[2]

#: one op of every class, inside dispatch_any's layout (its channel 0's first op in `_run`)
SAMPLES: list[Any] = [
    ops.Write(0, ops.DATA, 0, 16), ops.WriteValue(0, ops.SIGNAL, 8, 0), ops.AtomicAdd(0, ops.SIGNAL, 8, 0),
    ops.WriteImm(0, ops.DATA, 0, 0, 0, 0), ops.Send(0, 0, 0), ops.Read(0, ops.DATA, 0, 16),
    ops.CeCopy(0, ops.DATA, 0, 16, 0), ops.CeValue(0, ops.SIGNAL, 8, 0, 0), ops.Spin(5), ops.Flush(0),
    ops.SrcStore(0, 16), ops.SrcFlush(), ops.SrcClear(0, 16), ops.ProxyFence()]
#: values of every kind a plug-in may write (numpy's from arithmetic on arrays)
VALUES: list[Any] = [True, False, 0, 1, 2, -1, 3, np.int64(1), np.int32(0), np.True_, np.False_, 1.0, 0.0, None, "1",
                     ops.SIGNAL, b"x", (1,)]


def _typed_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields the rule holds (a str field, a region, is the op check's: tests/zoo/test_opcheck.py)."""
    return [f for f in dataclasses.fields(cls) if f.type in ("int", "bool")]


def expected(kind: str, v: Any) -> Any:
    """The rule, restated: the value the field holds, or TypeError where the op is refused."""
    integral = isinstance(v, (int, np.integer))
    if kind == "int":
        return int(v) if integral else TypeError
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    return bool(v) if integral and v in (0, 1) else TypeError


def test_every_op_class_and_typed_field_is_sampled() -> None:
    assert {type(o) for o in SAMPLES} == set(ops.WR_OPS) | set(ops.GPU_OPS) | {ops.Spin, ops.Flush}
    for cls in [*(type(o) for o in SAMPLES), Consume]:  # every other field a str
        assert all(f.type == "str" for f in dataclasses.fields(cls) if f not in _typed_fields(cls)), cls


def _subclass(cls: type) -> type:
    """A plug-in's own op class: a dataclass subclass, its `__init__` the one `dataclass` generates."""
    return dataclasses.dataclass(frozen=True, slots=True)(type(f"My{cls.__name__}", (cls,), {"__annotations__": {}}))


_CONSUME = Consume(ops.DATA, 0, 16, 0, "slot 0")
_CLASSES = st.sampled_from([o for o in SAMPLES if dataclasses.fields(type(o))] + [_CONSUME])


@settings(max_examples=600, deadline=None)
@given(_CLASSES, st.data(), st.sampled_from(VALUES), st.booleans(), st.booleans())
def test_a_field_holds_the_rules_value_or_the_op_is_refused(base: Any, data: st.DataObject, v: Any, sub: bool,
                                                           keyword: bool) -> None:
    cls = _subclass(type(base)) if sub else type(base)
    f = data.draw(st.sampled_from(_typed_fields(type(base))))
    args = {g.name: getattr(base, g.name) for g in dataclasses.fields(type(base))}
    args[f.name] = v
    want = expected(f.type, v)
    make = (lambda: cls(**args)) if keyword else (lambda: cls(*args.values()))
    if want is TypeError:
        with pytest.raises(TypeError, match=rf"^{cls.__name__}\.{f.name} must be an? (int|bool)\b"):
            make()
        return
    got = make()
    assert getattr(got, f.name) == want and type(getattr(got, f.name)) is type(want)
    canonical = cls(**{**args, f.name: want})
    assert got == canonical and hash(got) == hash(canonical) and repr(got) == repr(canonical)
    assert dataclasses.replace(base, **{f.name: v}) == dataclasses.replace(base, **{f.name: want})


def _run(first: list[Any]) -> Any:
    """dispatch_any with `first` posted at the start of channel 0 by a plug-in's sender: the WRs (op, start,
    done) and the verdict, or the exception's type and message."""
    class First(DispatchProtocol):  # a plug-in's subclass: its ops are read as they are (no records)
        def sender(self, scn: Any, lay: Any, epoch: int) -> Any:
            return [first + prog if c == 0 else prog for c, prog in enumerate(super().sender(scn, lay, epoch))]

    p = First("first", "the plain dispatch, `first` posted first on channel 0", {}, "finding")
    scn = codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 2},
                           "payload": {"num_tokens": 6, "epochs": 2}})
    try:
        run = simulate_over(build_form(scn, p), scn)  # not the form cache's: it keys on the protocol's name
    except Exception as e:  # noqa: BLE001 - the error is the answer compared
        return (type(e).__name__, str(e))
    return [(repr(w.op), w.start, w.done) for w in run.wrs], repr(run.violation)


class Other:
    """An op of no known class (it posts as a SEND does), made by no constructor of epfuzz's: read as it is."""

    def __init__(self, fence: Any, value: Any = 0) -> None:
        self.qp, self.fence, self.slot, self.value = 0, fence, 0, value

    def __repr__(self) -> str:  # the same for every one: runs compared by what the requester read
        return "Other()"


def _flag_cases() -> list[tuple[Any, str, Any]]:
    """(sample, field, value) for every bool field of every class and every int field of a few, with an integer
    (a numpy one) standing for the value."""
    out: list[tuple[Any, str, Any]] = []
    for o in SAMPLES:
        for f in _typed_fields(type(o)):
            if f.type == "bool":
                out += [(o, f.name, 1), (o, f.name, 0), (o, f.name, np.True_)]
            elif f.type == "int" and f.name in ("qp", "offset", "ns", "cq_slot"):
                out.append((o, f.name, np.int64(getattr(o, f.name))))
    return out


@pytest.mark.parametrize(("sample", "name", "v"), _flag_cases(),
                         ids=lambda x: x if isinstance(x, str) else type(x).__name__)
def test_an_integer_for_a_flag_runs_as_the_flag(sample: Any, name: str, v: Any) -> None:
    """On this process's path (compiled where built, pure under EPFUZZ_PURE=1): posted with an integer for the
    field, the run is the run of the op with the field's own value (before: compiled, a TypeError)."""
    want = expected(dict((f.name, f.type) for f in _typed_fields(type(sample)))[name], v)
    for cls in (type(sample), _subclass(type(sample))):
        args = {f.name: getattr(sample, f.name) for f in dataclasses.fields(type(sample))}
        got = _run([cls(**{**args, name: v})])
        assert got == _run([cls(**{**args, name: want})]) and isinstance(got, tuple) and isinstance(got[0], list)


def test_an_op_of_no_known_class_is_read_by_the_rule() -> None:
    assert _run([Other(1)]) == _run([Other(True)]) and isinstance(_run([Other(True)])[0], list)
    assert _run([Other(False, np.int64(7))]) == _run([Other(0, 7)])
    assert _run([Other(2)]) == ("TypeError", "Other.fence must be a bool (True or False; 0 and 1 are taken for "
                                "them), not 2")
    assert _run([Other(True, 1.5)]) == ("TypeError", "Other.value must be an int, not 1.5")


_BOTH = """
import sys; sys.path.insert(0, '.')
from epfuzz.core import native
from tests.sim import test_op_field_types as t
out = [native.running()]
for sample, name, v in t._flag_cases():
    try:
        op = type(sample)(**{**{f.name: getattr(sample, f.name) for f in t.dataclasses.fields(type(sample))}, name: v})
    except TypeError as e:
        out.append(str(e)); continue
    out.append(t._run([op]))
for v in (1, 0, 2, None, 1.5):
    out.append(t._run([t.Other(v)]))
print(repr(out[1:]), out[0])
"""


def _child(pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "EPFUZZ_PURE"}
    if pure:
        env["EPFUZZ_PURE"] = "1"
    out = subprocess.run([sys.executable, "-c", _BOTH], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_both_paths_run_and_refuse_the_same() -> None:
    """Each path in a child process that names it: the same runs and the same refusals (before: the compiled path
    raised a TypeError for every integer flag the pure path ran)."""
    if native.stale_reason() is not None:
        pytest.skip(f"compiled emulator not usable here: {native.stale_reason()}")
    pure, compiled = _child(True), _child(False)
    assert pure.endswith(" pure") and compiled.endswith(" compiled")
    assert pure.rsplit(" ", 1)[0] == compiled.rsplit(" ", 1)[0]
