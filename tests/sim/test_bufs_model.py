"""A lazy memory's `bufs` (`epfuzz.sim.lazydata.Bufs`, its data region made on first look) is, to whatever uses it
as a dict, the plain dict of a memory that made the region at once: random sequences of dict operations, reading
and mutating, answer the same (values, exceptions, order) on both, and leave both memories' regions (`_bufs`, the
dict `bufs` is once made) the same. dict's own C methods skip `__missing__` and write only the subclass's own
entries, so each one `Bufs` does not route through the region and the memory's regions answers differently
(before this test: `__setitem__`, `__delitem__`, `update`, `clear`, `|=`, `|`, `fromkeys`, copies; compiled, a
key that is no string or a value that is no bytearray, which a plain dict takes)."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from epfuzz.ir import ops
from epfuzz.protocols.base import Layout
from epfuzz.sim.memory import Memory

LAYOUTS = (Layout(1, 2, 32, 2, (2,)), Layout(2, 3, 48, 4, (3, 1)))
#: a key that is no region's, of any type a plain dict takes too (compiled, no str check on it)
KEYS = st.sampled_from([*ops.REGIONS, "extra", "other", 1])
#: values put in: fresh bytearrays (the same object goes into both dicts), told apart by their bytes, or any value
VALUES = st.binary(min_size=0, max_size=4).map(bytearray) | st.sampled_from([None, 5])
PAIRS = st.lists(st.tuples(KEYS, VALUES), max_size=3)

Op = Callable[[dict[str, bytearray]], Any]


def _ops() -> st.SearchStrategy[tuple[str, Op]]:
    """(a name for the failure message, an operation on a dict of regions returning what it answers)."""
    def named(name: str, f: Op) -> st.SearchStrategy[tuple[str, Op]]:
        return st.just((name, f))

    k, v = KEYS, VALUES
    return st.one_of(
        k.map(lambda key: (f"[{key!r}]", lambda b: b[key])),
        st.tuples(k, st.none() | v).map(lambda a: (f"get{a}", lambda b: b.get(*a))),
        k.map(lambda key: (f"{key!r} in", lambda b: key in b)),
        named("len", len), named("bool", bool), named("list", list), named("reversed", lambda b: list(reversed(b))),
        named("keys", lambda b: list(b.keys())), named("values", lambda b: list(b.values())),
        named("items", lambda b: list(b.items())), named("repr", repr), named("dict", dict),
        named("**", lambda b: {**b}), named("copy", lambda b: b.copy()), named("copy.copy", copy.copy),
        named("deepcopy", copy.deepcopy), named("pickle", lambda b: pickle.loads(pickle.dumps(b))),
        named("==", lambda b: (b == dict(b), b != {}, b == {})),
        named("fromkeys", lambda b: b.fromkeys(["a", ops.DATA], 3)), named("sorted", lambda b: sorted(b, key=str)),
        st.tuples(k, v).map(lambda a: (f"[{a[0]!r}]=", lambda b: b.__setitem__(*a))),
        k.map(lambda key: (f"del [{key!r}]", lambda b: b.__delitem__(key))),
        PAIRS.map(lambda p: (f"update({p})", lambda b: b.update(p))),
        PAIRS.map(lambda p: (f"update(iter {p})", lambda b: b.update(iter(p)))),
        PAIRS.map(lambda p: (f"update(dict {p})", lambda b: b.update(dict(p)))),
        v.map(lambda x: ("update(kw)", lambda b: b.update(extra=x))),
        PAIRS.map(lambda p: (f"|= {p}", lambda b: b.__ior__(dict(p)) is b)),
        PAIRS.map(lambda p: (f"| {p}", lambda b: b | dict(p))),
        PAIRS.map(lambda p: (f"{p} |", lambda b: dict(p) | b)),
        named("clear", lambda b: b.clear()),
        st.tuples(k, v).map(lambda a: (f"setdefault{a}", lambda b: b.setdefault(*a))),
        k.map(lambda key: (f"setdefault({key!r})", lambda b: b.setdefault(key))),
        k.map(lambda key: (f"pop({key!r})", lambda b: b.pop(key))),
        k.map(lambda key: (f"pop({key!r}, None)", lambda b: b.pop(key, None))),
        named("popitem", lambda b: b.popitem()),
    )


def _answer(f: Op, b: dict[str, bytearray]) -> Any:
    try:
        out = f(b)
    except Exception as e:  # noqa: BLE001 - the exception is the answer compared
        return ("raised", type(e))
    if isinstance(out, dict):  # a dict made by the operation: its type and its entries in order
        return (type(out), list(out.items()))
    return out


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(LAYOUTS), st.booleans(), st.lists(_ops(), min_size=1, max_size=8))
def test_bufs_answers_as_the_plain_dict_of_an_eager_memory(layout: Layout, later: bool,
                                                           steps: list[tuple[str, Op]]) -> None:
    lazy, eager = Memory(layout), Memory(layout, lazy=False)
    if later:  # a later epoch's start: the lazy region's base is that epoch's poison
        for m in (lazy, eager):
            m.start_epoch(1)
    b = lazy.bufs
    assert type(b) is not dict and type(eager.bufs) is dict  # what is under test: a lazy region's `Bufs`
    done = []
    for name, f in steps:
        done.append(name)
        assert _answer(f, b) == _answer(f, eager.bufs), done
    assert list(b.items()) == list(eager.bufs.items()), done
    # the memory's own regions are what the operations left, as the eager memory's (its `bufs` is its `_bufs`)
    assert list(lazy._bufs.items()) == list(eager._bufs.items()), done
