"""The built-in protocols, one module per family, by name in `REGISTRY`; the `ZOO` table.

Importing this package (the protocol API: `Protocol`, `Receiver`, `get_protocol`) imports no
family: `REGISTRY` knows which module defines each built-in name (`BUILTIN_MODULES`) and imports
that family the first time the name is asked for. `REGISTRY.items`, `ZOO` and `FAMILIES` import
them all. `get_protocol` also loads `module:Attr` plug-ins (`epfuzz.protocols.registry`).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from epfuzz.protocols.base import Consume, Layout, Pattern, Protocol, Receiver
from epfuzz.protocols.registry import Registry, ZooRow

if TYPE_CHECKING:
    from epfuzz.protocols.dispatch import DispatchProtocol

#: each family module and the names of the protocols its `PROTOCOLS` defines, in registration order
#: (the order `epfuzz list` and seed generation use): DeepEP's own, patterns 2-10, the two deep sets,
#: then issue 30's breadth.
#: tests/structure/test_lazy_protocols.py checks this table against the modules.
FAMILY_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "epfuzz.protocols.deepep": ("deepep_v2_dispatch", "deepep_v2_dispatch_fixed", "write_imm_signal",
                                "dispatch_any"),
    "epfuzz.protocols.flag_write_signal": ("flag_write_signal", "flag_write_signal_fixed"),
    "epfuzz.protocols.inband_tag": ("inband_tag", "inband_tag_fixed"),
    "epfuzz.protocols.flush_other_qp": ("flush_other_qp", "flush_other_qp_fixed"),
    "epfuzz.protocols.shared_counter": ("shared_counter", "shared_counter_fixed"),
    "epfuzz.protocols.stale_epoch_counter": ("stale_epoch_counter", "stale_epoch_counter_fixed"),
    "epfuzz.protocols.signal_reset_race": ("signal_reset_race", "signal_reset_race_fixed"),
    "epfuzz.protocols.early_credit_release": ("early_credit_release", "early_credit_release_fixed"),
    "epfuzz.protocols.gdr_no_flush": ("gdr_no_flush", "gdr_no_flush_fixed"),
    "epfuzz.protocols.geometry_index": ("geometry_index", "geometry_index_fixed"),
    # the deep zoo (issue 15) has no `pattern` links: several pairs share a pattern; its table is deep.DEEP_ZOO
    "epfuzz.protocols.deep": ("deep_ro_signal", "deep_ro_signal_fixed", "deep_remainder_flag",
                              "deep_remainder_flag_fixed", "deep_flag_write", "deep_flag_write_fixed",
                              "deep_notify_qp", "deep_notify_qp_fixed", "deep_other_qp", "deep_other_qp_fixed",
                              "deep_imm_other_qp", "deep_imm_other_qp_fixed", "deep_gdr", "deep_gdr_fixed",
                              "deep_reset_race", "deep_reset_race_fixed"),
    # the second deep set (issue 27): other defences than the trailer check; its table is deep2.DEEP2_ZOO
    "epfuzz.protocols.deep2": ("deep2_head_stamp", "deep2_head_stamp_fixed", "deep2_mid_stamp",
                               "deep2_mid_stamp_fixed", "deep2_head_trailer", "deep2_head_trailer_fixed",
                               "deep2_notify", "deep2_notify_fixed", "deep2_packed", "deep2_packed_fixed",
                               "deep2_spin_qp", "deep2_spin_qp_fixed", "deep2_seq_stride",
                               "deep2_seq_stride_fixed", "deep2_meta_qp", "deep2_meta_qp_fixed",
                               "deep2_cqe_packets", "deep2_cqe_packets_fixed"),
    # issue 30's breadth: DeepEP's other paths and the 2026 field patterns, pairs listed in their modules' PAIRS
    "epfuzz.protocols.deepep_paths": ("deepep_combine", "deepep_combine_fixed", "deepep_ll_dispatch",
                                      "deepep_ll_dispatch_fixed", "deepep_ll_combine", "deepep_ll_combine_fixed",
                                      "deepep_direct", "deepep_direct_fixed"),
    "epfuzz.protocols.field2026": ("signal_baseline", "signal_baseline_fixed", "frozen_flag", "frozen_flag_fixed",
                                   "init_zeroing", "init_zeroing_fixed", "flush_before_poll",
                                   "flush_before_poll_fixed"),
    "epfuzz.protocols.pull": ("read_flush_unfenced", "read_flush_unfenced_fixed", "read_flush_other_qp",
                              "read_flush_other_qp_fixed"),
    "epfuzz.protocols.cebatch": ("ce_batch_signal", "ce_batch_signal_fixed", "ce_signal_override",
                                 "ce_signal_override_fixed"),
    # issue 30's GPU-side pairs (the sender-side source layer, epfuzz.model.source)
    "epfuzz.protocols.gpu2026": ("stale_quiet", "stale_quiet_fixed", "source_no_flush", "source_no_flush_fixed",
                                 "tma_flag", "tma_flag_fixed", "ro_only_strict_mr", "ro_only_strict_mr_fixed",
                                 "mixed_plane", "mixed_plane_fixed"),
    # issue 30's receiver-side pair (the receiver cache layer, epfuzz.model.rxcache)
    "epfuzz.protocols.rxcache": ("stale_cache", "stale_cache_fixed"),
}
#: the families with tables of their own instead of `pattern` links (deep.DEEP_ZOO, deep2.DEEP2_ZOO; the
#: breadth modules' PAIRS)
UNLINKED_FAMILIES: tuple[str, ...] = ("epfuzz.protocols.deep", "epfuzz.protocols.deep2",
                                      "epfuzz.protocols.deepep_paths", "epfuzz.protocols.field2026",
                                      "epfuzz.protocols.pull", "epfuzz.protocols.cebatch", "epfuzz.protocols.gpu2026",
                                      "epfuzz.protocols.rxcache")
#: the families whose `pattern` links make the bug-zoo table
ZOO_FAMILIES: tuple[str, ...] = tuple(m for m in FAMILY_PROTOCOLS if m not in UNLINKED_FAMILIES)
#: a built-in protocol's name -> the module that defines it
BUILTIN_MODULES: dict[str, str] = {n: m for m, names in FAMILY_PROTOCOLS.items() for n in names}

REGISTRY = Registry(builtin=BUILTIN_MODULES)

#: the built-in protocols' names, in registration order: plug-ins a process loads later (tests load
#: some) are registered too, so anything that must be the same in every process iterates this
BUILTIN: tuple[str, ...] = tuple(BUILTIN_MODULES)
get_protocol = REGISTRY.get
load_plugin = REGISTRY.load_plugin

if TYPE_CHECKING:
    #: (number, title, bad protocol name, fixed protocol name) per bug-zoo pattern, read off the protocols
    ZOO: tuple[ZooRow, ...]
    #: the bug-zoo family modules, imported
    FAMILIES: tuple[ModuleType, ...]


def __getattr__(name: str) -> object:
    """The parts that need every family imported, computed on first use (PEP 562)."""
    value: object
    if name == "ZOO":
        value = REGISTRY.zoo(n for m in ZOO_FAMILIES for n in FAMILY_PROTOCOLS[m])
    elif name == "FAMILIES":
        value = tuple(importlib.import_module(m) for m in ZOO_FAMILIES)
    elif name == "DispatchProtocol":
        from epfuzz.protocols.dispatch import DispatchProtocol

        value = DispatchProtocol
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = ["BUILTIN", "Consume", "DispatchProtocol", "Layout", "Pattern", "Protocol", "Receiver", "REGISTRY", "ZOO",
           "ZooRow", "get_protocol", "load_plugin"]
