"""What a NIC's memory keys allow: relaxed-only devices and the WQE-level fence that replaces a strict key.

DeepEP #674 (and nccl#2210's NCCL_WIN_STRICT_ORDERING) fix the #661 conjunction by registering the window
without IBV_ACCESS_RELAXED_ORDERING. Some devices have no strict-ordering memory keys (mlx5 cap
`mkc_order_write_after_write_ro_only`): UCX #11649 (a95686218a) then registers relaxed anyway and drops the
strict companion key, and UCX #11721 (eb9268a164) makes the transports order explicitly, RC with the
strong-ordering WQE fence. On such a device #674's fix is unavailable: the `mlx5-ro-only` preset
(`Preset.model` "pcie-ro-only") registers every MR relaxed, and a signal must carry the fence itself
(`AtomicAdd(strong=True)`, `WriteValue(strong=True)`). Each clause is pinned by a test in
tests/rules/test_device_rules.py.
"""

from __future__ import annotations

from dataclasses import dataclass

RO_ONLY_MODEL = "pcie-ro-only"


@dataclass(frozen=True)
class DeviceClause:
    name: str
    source: str
    rule: str


DEVICE_CLAUSES: dict[str, DeviceClause] = {c.name: c for c in (
    DeviceClause("MR-strict", "DeepEP #674, nccl#2210 (NCCL_WIN_STRICT_ORDERING: no IBV_ACCESS_RELAXED_ORDERING)",
                 "a device with strict keys registers a strict MR as asked: its TLPs carry no RO"),
    DeviceClause("RO-only-key", "UCX #11649 / a95686218a (mlx5 mkc_order_write_after_write_ro_only: \"some devices "
                 "do not support strong-order memory keys\")",
                 "a relaxed-only device registers a strict MR request relaxed: its TLPs carry RO whenever the "
                 "NIC sets RO, so #674's fix orders nothing"),
    DeviceClause("WQE-strong-order", "UCX #11721 / eb9268a164 (\"RC uses strong-order WQE fence flags\")",
                 "a WQE with the strong-ordering fence flag is placed without RO whatever its key: A2a/C2a keep "
                 "it behind its QP's earlier posted writes"),
)}


def mr_relaxed(requested: bool, ro_only: bool) -> tuple[bool, str]:
    """Whether the MR is registered relaxed, and the clause that says so."""
    if requested:
        return True, ""
    return (True, "RO-only-key") if ro_only else (False, "MR-strict")


def tlp_ro(mr_ro: bool, nic_ro: bool, strong: bool) -> bool:
    """Whether a TLP of a WQE carries RO: the MR's and the NIC's say, unless the WQE is strongly ordered."""
    return mr_ro and nic_ro and not strong
