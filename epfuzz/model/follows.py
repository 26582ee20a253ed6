"""Which `signal.*` scenario fields a protocol's ops follow.

The default signature fields name the signal's kind, QP and fence because the built-in
dispatch protocols post what those fields say. A plug-in that posts its own signal ignores
them, yet they vary from input to input: each combination became a raw signature of its own
(a tutorial plug-in gave 666 raw signatures for 2 bugs in 10 s, and the summary spent minutes
grouping them). A field is kept where changing it changes the ops the protocol posts in some
probe scenario; `explain` asks the same question of one scenario.
"""

from __future__ import annotations

import random

from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol

#: the signal fields of the default signature and the values a probe tries for each
SIGNAL_FIELDS = {"signal.kind": ("faa", "write", "write_imm", "send"), "signal.other_qp": (False, True),
                 "signal.fence": (False, True)}
PROBES = 8
_cache: dict[int, tuple[Protocol, frozenset[str]]] = {}


def posted_ops(scn: Scenario, proto: Protocol) -> list[list[list[object]]]:
    """The ops the protocol posts for `scn`, every epoch: what a protocol-side field really changed."""
    lay = proto.layout(scn)
    return [[list(p) for p in proto.sender(scn, lay, e)] for e in range(scn.payload.epochs)]


def followed(proto: Protocol, spec: str) -> frozenset[str]:
    """The `signal.*` fields whose value changes what `proto` (registered as `spec`) posts in one
    of a few seeded probe scenarios. A probe that raises counts the field as followed: dropping a
    field from the signature may merge two bugs, keeping it only splits one."""
    hit = _cache.get(id(proto))
    if hit is not None and hit[0] is proto:
        return hit[1]
    from epfuzz.encoding import codec

    rng = random.Random(0)
    found: set[str] = set()
    for i in range(PROBES):
        try:
            scn = codec.decode(b"" if i == 0 else rng.randbytes(64), spec, "spec")
            base = posted_ops(scn, proto)
        except Exception:  # noqa: BLE001 - the plug-in's own code: keep every field
            return frozenset(SIGNAL_FIELDS)
        for path, values in SIGNAL_FIELDS.items():
            if path in found:
                continue
            for v in values:
                if v == scn.get_path(path):
                    continue
                try:
                    if posted_ops(scn.with_path(path, v), proto) != base:
                        found.add(path)
                        break
                except Exception:  # noqa: BLE001 - as above
                    found.add(path)
                    break
    _cache[id(proto)] = (proto, frozenset(found))
    return frozenset(found)
