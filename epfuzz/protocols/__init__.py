"""The built-in protocols, one module per family, assembled into `REGISTRY` and the `ZOO` table.

`get_protocol` also loads `module:Attr` plug-ins (`epfuzz.protocols.registry`).
"""

from __future__ import annotations

from epfuzz.protocols import (
    deep,
    deepep,
    early_credit_release,
    flag_write_signal,
    flush_other_qp,
    gdr_no_flush,
    geometry_index,
    inband_tag,
    shared_counter,
    signal_reset_race,
    stale_epoch_counter,
)
from epfuzz.protocols.base import Consume, Layout, Pattern, Protocol, Receiver
from epfuzz.protocols.dispatch import DispatchProtocol
from epfuzz.protocols.registry import Registry, ZooRow

#: registration order is the order `epfuzz list` and seed generation use: DeepEP's own, then patterns 2-10
FAMILIES = (deepep, flag_write_signal, inband_tag, flush_other_qp, shared_counter, stale_epoch_counter,
            signal_reset_race, early_credit_release, gdr_no_flush, geometry_index)

REGISTRY = Registry()
for _family in FAMILIES:
    for _proto in _family.PROTOCOLS:
        REGISTRY.add(_proto)

#: (number, title, bad protocol name, fixed protocol name) per bug-zoo pattern, read off the protocols
ZOO: tuple[ZooRow, ...] = REGISTRY.zoo()
#: the deep zoo (issue 15) has no `pattern` links: several pairs share a pattern; its table is deep.DEEP_ZOO
for _proto in deep.PROTOCOLS:
    REGISTRY.add(_proto)

#: the built-in protocols' names, in registration order: plug-ins a process loads later (tests load
#: some) are registered too, so anything that must be the same in every process iterates this
BUILTIN: tuple[str, ...] = tuple(REGISTRY.items)
get_protocol = REGISTRY.get
load_plugin = REGISTRY.load_plugin

__all__ = ["BUILTIN", "Consume", "DispatchProtocol", "Layout", "Pattern", "Protocol", "Receiver", "REGISTRY", "ZOO",
           "ZooRow", "get_protocol", "load_plugin"]
