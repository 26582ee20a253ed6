"""Random decoded scenarios of the exact dispatch protocols, the inputs several property tests walk: one
definition, so they walk the same kind of input (bytes of 0-95, decoded under spec)."""

from __future__ import annotations

import random
from collections.abc import Iterator

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.protocols.dispatch import DispatchProtocol


def dispatch_protocols() -> list[str]:
    """The built-in protocols that are a DispatchProtocol itself (not a subclass: those take the generic path)."""
    return [n for n in BUILTIN if type(get_protocol(n)) is DispatchProtocol]


def random_decoded(name: str, n: int, seed: str) -> Iterator[tuple[bytes, Scenario]]:
    """`n` (raw bytes, scenario) pairs of protocol `name`, the same for the same `seed`."""
    rng = random.Random(seed)
    for _ in range(n):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 96)))
        yield data, codec.decode(data, name, "spec")
