"""The random baseline: random bytes through the decoder (every byte string is a scenario)."""

from __future__ import annotations

import random as _random

from epfuzz.protocols.base import Protocol
from epfuzz.search.executor import Execution, SimExecutor


class RandomSearch:
    def __init__(self, protocol: str, proto: Protocol, seed: int, preset: str = "spec") -> None:
        self.rng = _random.Random(seed)
        self.executor = SimExecutor(protocol, proto, preset)

    def step(self) -> Execution:
        return self.executor.run(self.rng.randbytes(self.rng.randrange(0, 129)))


class SamplerSearch:
    """The schedule sampler alone (epfuzz.search.sampler): a random configuration, a PCT-style schedule."""

    def __init__(self, protocol: str, proto: Protocol, seed: int, preset: str = "spec") -> None:
        from epfuzz.search import sampler

        self.draw = sampler.SamplerSearch(protocol, proto, seed, preset)
        self.executor = SimExecutor(protocol, proto, preset)

    def step(self) -> Execution:
        return self.executor.run_scenario(self.draw.next_scenario())
