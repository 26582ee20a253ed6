"""`epfuzz.ir.opmake.layout_of` (issue 31): the layout a fresh configuration's numbers make, compiled, must be the
one the plain-Python computation makes (`base._reference_layout`, `_layout`'s body as it was): the same class with
every field set (checked against `dataclasses.fields`), equal, with the same hash and repr, for random numbers and
for every decoded scenario's; and `Protocol.layout` memoizes by exactly the numbers the computation reads."""

from __future__ import annotations

import dataclasses
import pickle
import random

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.opmake import layout_of
from epfuzz.protocols import base, get_protocol
from epfuzz.protocols.base import Layout


def _same(a: Layout, b: Layout) -> None:
    assert type(a) is type(b) is Layout
    for f in dataclasses.fields(b):
        assert getattr(a, f.name) == getattr(b, f.name), f.name
        assert type(getattr(a, f.name)) is type(getattr(b, f.name)), f.name
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    assert pickle.loads(pickle.dumps(a)) == b


def test_the_compiled_layout_is_the_reference() -> None:
    rng = random.Random(31)
    for _ in range(3000):
        args = (rng.randrange(0, 300), rng.randrange(0, 9000), rng.randrange(0, 300), rng.randrange(0, 64),
                rng.randrange(1, 12), rng.random() < 0.3, rng.randrange(0, 20))
        _same(layout_of(Layout, *args), base._reference_layout(*args))
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout_of(Layout, 1, 32, 0, 0, 1, False, 1).token_bytes = 3  # type: ignore[misc]


def test_no_channel_raises_as_before() -> None:
    with pytest.raises(ValueError):
        base._reference_layout(4, 32, 0, 0, 0, False, 1)
    with pytest.raises(ValueError):
        layout_of(Layout, 4, 32, 0, 0, 0, False, 1)


@pytest.mark.parametrize("name", ["dispatch_any", "deepep_v2_dispatch", "geometry_index", "inband_tag"])
def test_a_protocols_layout_is_the_reference_of_its_scenarios_numbers(name: str) -> None:
    """The cache's key, the seven numbers, is all the computation reads of the scenario (`Protocol.layout`)."""
    p = get_protocol(name)
    rng = random.Random(name)
    for _ in range(300):
        scn = codec.decode(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 96))), name, "spec")
        pay, sig = scn.payload, scn.signal
        _same(p.layout(scn), base._reference_layout(pay.num_tokens, pay.hidden_bytes, pay.scale_bytes,
                                                    pay.meta_bytes, scn.topology.num_channels, sig.at_end_only,
                                                    sig.interval))
