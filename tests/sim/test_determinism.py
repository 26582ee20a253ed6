from __future__ import annotations

import random

from epfuzz.encoding import codec
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.sim.engine import simulate


def test_1000_random_scenarios_give_identical_traces_twice():
    rng = random.Random(20261130)
    names = sorted(BUILTIN)
    for _ in range(1000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 96)))
        s = codec.decode(data, rng.choice(names))
        proto = get_protocol(s.protocol)
        assert simulate(s, proto).fingerprint() == simulate(s, proto).fingerprint()
