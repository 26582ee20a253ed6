"""`epfuzz.protocols.consmake` (issue 31): what the compiled receivers make their accepts with must be what
`Consume` makes from the same arguments, positional, by keyword or left to the default: the same class with
every field set (checked against `dataclasses.fields`, so a field added to `Consume` fails here until
`consume` sets it), equal, with the same hash and repr, frozen, and pickled and copied as `Consume`'s own."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import random

import pytest

from epfuzz.ir import ops
from epfuzz.protocols.base import Consume
from epfuzz.protocols.consmake import consume


def _same(a: object, b: object) -> None:
    assert type(a) is type(b)
    for f in dataclasses.fields(b):  # type: ignore[arg-type]
        assert getattr(a, f.name) == getattr(b, f.name), f.name
        assert type(getattr(a, f.name)) is type(getattr(b, f.name)), f.name
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)


def test_signature_is_the_class_s() -> None:
    assert [p.name for p in inspect.signature(consume).parameters.values()] == \
        [f.name for f in dataclasses.fields(Consume)]
    defaults = {f.name: f.default for f in dataclasses.fields(Consume) if f.default is not dataclasses.MISSING}
    assert {p.name: p.default for p in inspect.signature(consume).parameters.values()
            if p.default is not inspect.Parameter.empty} == defaults


@pytest.mark.parametrize("seed", range(20))
def test_same_object_as_the_class_makes(seed: int) -> None:
    rng = random.Random(seed)
    args = (rng.choice(ops.REGIONS), rng.randrange(1 << 20), rng.choice([0, 16, rng.randrange(1 << 16)]),
            rng.randrange(64), f"slots [{rng.randrange(9)}, {rng.randrange(9)}) of channel {rng.randrange(9)}")
    _same(consume(*args), Consume(*args))
    inv = rng.random() < 0.5
    made = consume(*args, invalidate=inv)
    _same(made, Consume(*args, invalidate=inv))
    _same(pickle.loads(pickle.dumps(made)), made)
    _same(copy.copy(made), made)
    _same(copy.deepcopy(made), made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.offset = 1  # type: ignore[misc]
