"""Platform presets: named bundles of NIC/fabric facts a harness runs under.

A preset pins *platform* knobs (what the NIC, the root complex and the fabric do);
a protocol pins *application* knobs (how it registers its MR, how it signals). The
two sets are disjoint by construction (checked at import), so a scenario never has
two owners for one field. `spec` pins nothing: everything the PCIe and IB specs
permit is on the table, which is what a bug hunt wants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epfuzz.infra.errors import InputError

PLATFORM_FIELDS = frozenset({
    "knobs.nic_relaxed_ordering", "knobs.atomic_mode", "knobs.adaptive_routing",
    "knobs.hca_o920", "knobs.ido", "knobs.num_functions",
})


@dataclass(frozen=True)
class Preset:
    name: str
    doc: str
    fixed: dict[str, Any] = field(default_factory=dict)
    #: which ordering rules the sim applies: the PCIe table and IB ("pcie"), the same on a device whose memory keys
    #: can only be relaxed ("pcie-ro-only", `epfuzz.model.device`), or the PTX clauses ("nvlink")
    model: str = "pcie"


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("spec", "anything PCIe r5.0 Table 2-40 and the IB spec permit; every platform knob is fuzzed"),
    Preset("mlx5-pci-atomic", "ConnectX with PCI_ATOMIC_MODE=4 and RO enabled, in-order fabric, "
           "no o9-20 enforcement above PCIe (the DeepEP #661 platform)",
           {"knobs.atomic_mode": 4, "knobs.nic_relaxed_ordering": True, "knobs.adaptive_routing": False,
            "knobs.hca_o920": False}),
    Preset("mlx5-default", "ConnectX defaults: PCI_ATOMIC_MODE=0 (read-modify-write), RO enabled, "
           "in-order fabric",
           {"knobs.atomic_mode": 0, "knobs.nic_relaxed_ordering": True, "knobs.adaptive_routing": False,
            "knobs.hca_o920": False}),
    Preset("ib-o9-20", "an HCA that enforces IB o9-20 (atomic is an ordering point for earlier writes)",
           {"knobs.hca_o920": True}),
    Preset("no-ro", "NIC never sets Relaxed Ordering (NCCL_IB_PCI_RELAXED_ORDERING=0)",
           {"knobs.nic_relaxed_ordering": False}),
    Preset("mlx5-ro-only", "a ConnectX whose memory keys can only be relaxed (cap mkc_order_write_after_write_ro_only; "
           "UCX #11649): a strict MR request is registered relaxed, so DeepEP #674's fix is unavailable and a "
           "strong-ordering WQE fence must order the signal; PCI_ATOMIC_MODE=4, RO on, in-order fabric",
           {"knobs.atomic_mode": 4, "knobs.nic_relaxed_ordering": True, "knobs.adaptive_routing": False,
            "knobs.hca_o920": False}, model="pcie-ro-only"),
    Preset("mixed-nvlink-rdma", "DeepEP V2 direct mode with a scaleup team spanning nodes (DeepEP #715): same-node "
           "peers get TMA stores over NVLink (`Write(tma=True)`), the others RDMA puts, and the signal goes by RDMA; "
           "a device-scope release orders the NIC's reads, not the NVLink stores (MIX_CLAUSES); RO off, PCI atomic "
           "mode 4, in-order fabric",
           {"knobs.atomic_mode": 4, "knobs.nic_relaxed_ordering": False, "knobs.adaptive_routing": False,
            "knobs.hca_o920": False}, model="mixed"),
    Preset("nvlink", "GPU stores into a peer GPU over NVLink (the cuda backend, path p2p): weak stores "
           "unordered, __threadfence_system and st.release.sys ordering points, __threadfence not across "
           "GPUs, atomicAdd_system relaxed unless fenced, CTAs unordered (epfuzz.model.ordering.NVLINK_CLAUSES); "
           "the knobs pinned here keep the NIC stages from reordering before those rules apply",
           {"knobs.atomic_mode": 4, "knobs.nic_relaxed_ordering": False, "knobs.adaptive_routing": False,
            "knobs.hca_o920": False, "knobs.ido": False, "knobs.num_functions": 1}, model="nvlink"),
)}

for _p in PRESETS.values():
    assert set(_p.fixed) <= PLATFORM_FIELDS, f"preset {_p.name} pins a non-platform field"


def model_of(preset: str) -> str:
    """The ordering model a scenario's preset selects (`Preset.model`); "pcie" for a name no preset has (a
    scenario's name is checked where it is read: the sim's stages ask only which rules apply)."""
    p = PRESETS.get(preset)
    return "pcie" if p is None else p.model


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise InputError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
