"""The `nvlink` preset's view of a run: each sender op is a GPU access, ordered by the PTX clauses.

The NIC pipeline still builds the TLP stream (in program order per channel; the preset pins the knobs
that would reorder it before the root complex: no adaptive routing, PCIe AtomicOps, no o9-20), but the
adversary asks `epfuzz.model.ordering.nvlink_pass` whether one access may become visible before another,
instead of the PCIe table: payload stores are weak, a signal is an ordering point only when the
scenario's `gpu.fence` / `gpu.store` make it one, and different channels (CTAs) are unordered.
Epoch barriers and the receiver's own stores keep the rules every preset has.
"""

from __future__ import annotations

from collections.abc import Sequence

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.model.ordering import GpuAccess, GpuOp, gpu_signal_clause, mixed_pass, nvlink_pass
from epfuzz.sim.adversary import PassRule
from epfuzz.sim.packets import Packet, PacketKind, Tlp, Wr
from epfuzz.sim.pass_rules import tlp_pass_rule
from epfuzz.sim.responder import preset_model


def is_nvlink(scn: Scenario) -> bool:
    return preset_model(scn.preset) == "nvlink"


def issue_order(packets: Sequence[Packet], wrs: Sequence[Wr]) -> list[Packet]:
    """Packets in the order the GPU issues their stores: by post time, channel, then program order.

    On a GPU nothing stands between the SM and the peer's memory that would reorder accesses by their
    QP (per-QP delays and throttles are NIC facts); what may reorder them is the adversary, within the
    clauses. So the arrival order the adversary starts from is the issue order.
    """
    post = {w.id: w.post for w in wrs}
    return sorted(packets, key=lambda p: (p.epoch, post[p.wr], p.channel, p.wr, p.psn))


def gpu_ops(scn: Scenario, packets: Sequence[Packet], wrs: Sequence[Wr] = ()) -> dict[int, GpuOp]:
    """The GPU access behind each packet (by packet seq): what the cuda backend's interpreter issues. A TMA
    store (`Write(tma=True)`, the async proxy) carries where the channel's next ProxyFence is (`wrs`)."""
    g = scn.gpu
    store = GpuOp(GpuAccess.STORE, gpu_signal_clause(GpuAccess.STORE, g.fence, g.store, g.path))
    atomic = GpuOp(GpuAccess.ATOMIC, gpu_signal_clause(GpuAccess.ATOMIC, g.fence, g.store, g.path))
    out: dict[int, GpuOp] = {}
    for p in packets:
        if p.kind == PacketKind.WRITE:
            w = wrs[p.wr] if wrs else None
            if w is not None and isinstance(w.op, ops.Write) and w.op.tma:
                out[p.seq] = GpuOp(GpuAccess.STORE, "NV-weak", p.channel, True, w.op_index, w.proxy_fence)
            else:
                out[p.seq] = GpuOp(GpuAccess.STORE, "NV-weak", p.channel)
        elif p.kind == PacketKind.READ:  # a READ: a weak peer load, orders nothing
            out[p.seq] = GpuOp(GpuAccess.STORE, "NV-weak", p.channel)
        else:
            base = atomic if p.kind == PacketKind.ATOMIC else store
            out[p.seq] = GpuOp(base.access, base.clause, p.channel, index=p.op_index)
    return out


def pass_rule(scn: Scenario, packets: Sequence[Packet], wrs: Sequence[Wr] = ()) -> PassRule:
    """The adversary's rule for this run: the PCIe/IB rules, the NVLink clauses under `nvlink` (copy-engine
    copies keep their own clauses, `epfuzz.model.cebatch`; an RDMA READ there is a weak peer load), or under
    `mixed-nvlink-rdma` the PCIe/IB rules except that an RDMA-plane TLP may pass the same sender's earlier
    NVLink store (a TMA store) unless a system-scope fence orders them (`ordering.MIX_CLAUSES`)."""
    base = tlp_pass_rule()
    if preset_model(scn.preset) == "mixed":
        nv = {p.seq for p in packets if wrs and isinstance(op := wrs[p.wr].op, ops.Write) and op.tma}
        fence = scn.gpu.fence

        def mixed(later: Tlp, earlier: Tlp) -> str | None:
            if later.epoch == earlier.epoch and not later.local and not earlier.local and \
                    earlier.pkt in nv and later.pkt not in nv:
                return mixed_pass(True, True, fence)
            return base(later, earlier)

        return mixed
    if not is_nvlink(scn):
        return base
    access = gpu_ops(scn, packets, wrs)

    def rule(later: Tlp, earlier: Tlp) -> str | None:
        if later.epoch != earlier.epoch or later.local or earlier.local or later.batch >= 0 or earlier.batch >= 0:
            return base(later, earlier)
        return nvlink_pass(access[later.pkt], access[earlier.pkt])

    return rule
