"""Built-in protocols, by name. `get_protocol` also loads `module:Attr` plug-ins."""

from __future__ import annotations

import importlib
import os
import sys

from epfuzz.errors import InputError
from epfuzz.protocols.base import Consume, Layout, Protocol, Receiver, Registry
from epfuzz.protocols.dispatch import DispatchProtocol

REGISTRY = Registry()

_DEEPEP = {"signal.kind": "faa", "signal.other_qp": False, "signal.fence": False,
           "signal.encoding": "pack2", "signal.at_end_only": False}

REGISTRY.add(DispatchProtocol(
    "deepep_v2_dispatch",
    "DeepEP V2 hybrid dispatch before #674: window registered with relaxed ordering, per-channel tail "
    "raised by fetch-and-add (VA signal, pack2(finish, tail)) every update_interval tokens on the data QP",
    {**_DEEPEP, "knobs.mr_relaxed": True}, "finding", ("DeepEP #661", "DeepEP #674", "nccl#2210")))
REGISTRY.add(DispatchProtocol(
    "deepep_v2_dispatch_fixed",
    "DeepEP V2 hybrid dispatch after #674: the same, window registered NCCL_WIN_STRICT_ORDERING",
    {**_DEEPEP, "knobs.mr_relaxed": False}, "clean", ("DeepEP #674",)))
REGISTRY.add(DispatchProtocol(
    "write_imm_signal",
    "completion by RDMA WRITE_WITH_IMM on the data QP: the receiver trusts the CQE, which IB orders "
    "after the QP's earlier data",
    {"signal.kind": "write_imm", "signal.other_qp": False}, "clean", ("IB spec C9-? / o9-20",)))
REGISTRY.add(DispatchProtocol(
    "dispatch_any",
    "the dispatch family with every signal and MR knob left to the fuzzer (litmus space for the safety "
    "table: signal kind x placement x fence x MR ordering)",
    {}, "finding", ("research notes: ten bug patterns",)))

from epfuzz.protocols.deep import PROTOCOLS as _DEEP  # noqa: E402
from epfuzz.protocols.zoo import PROTOCOLS as _ZOO  # noqa: E402

for _p in (*_ZOO, *_DEEP):
    REGISTRY.add(_p)


def get_protocol(name: str) -> Protocol:
    if name in REGISTRY.items:
        return REGISTRY.items[name]
    if ":" in name:
        return load_plugin(name)
    raise InputError(f"unknown protocol {name!r}; known: {', '.join(REGISTRY.items)} (or module:Attr)")


def load_plugin(spec: str) -> Protocol:
    """Import `pkg.module:Attr` (a Protocol instance or class) and register it under `spec`."""
    mod_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:  # user modules live beside the user, not in site-packages
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
        obj = getattr(mod, attr)
    except (ImportError, AttributeError) as e:
        raise InputError(f"cannot load protocol {spec!r}: {e}") from None
    proto = obj() if isinstance(obj, type) else obj
    if not isinstance(proto, Protocol):
        raise InputError(f"{spec!r} is not an epfuzz Protocol")
    REGISTRY.items[spec] = proto
    return proto


__all__ = ["Consume", "DispatchProtocol", "Layout", "Protocol", "Receiver", "REGISTRY", "get_protocol"]
