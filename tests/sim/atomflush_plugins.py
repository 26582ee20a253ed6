"""Plug-ins from a protocol author's trial (2026-12-05, H1; /work/trial-author/w/flushxqp.py, trimmed): data on the
channel's QP, a 'flush' op on that QP whose completion the sender waits for, then the flag.

- ReadFlushXQP: an 8-byte RDMA READ of the last data bytes, a Flush, the flag on the NEXT QP.
- AtomicFlushXQP: a fetch-and-add of 0 on a scratch word (the channel's recv entry) instead of the READ.
- AtomicFenceSameQP: one QP: data, the fetch-and-add of 0, then the flag with IBV_SEND_FENCE.

The atomic's response carries the fetched value, so the responder executed it before the flag was posted: only an
RO AtomicOp passing the RO data (PCI atomic mode 4, C2b, no o9-20) lets the flag be seen before the data.
"""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.protocols.base import Consume, Protocol, Receiver

_C2B = {"spec": "finding", "mlx5-pci-atomic": "finding", "mlx5-ro-only": "finding", "*": "clean"}


class FlagReceiver(Receiver):
    """A channel's data is consumed once its signal word holds epoch + 1."""

    watch = frozenset({ops.SIGNAL})

    def __init__(self, layout):
        self.layout = layout
        self.got = [False] * layout.num_channels

    def start_epoch(self, epoch):
        self.got = [False] * self.layout.num_channels

    def poll(self, mem, epoch):
        out = []
        for c, got in enumerate(self.got):
            if not got and mem.u64(ops.SIGNAL, c * 8) == epoch + 1:
                self.got[c] = True
                n = self.layout.tokens_in_channel[c] * self.layout.token_bytes
                if n:
                    out.append(Consume(ops.DATA, self.layout.slot_offset(c, 0), n, c, f"channel {c}"))
        return out

    def done(self):
        return all(self.got)

    def state(self):
        return tuple(self.got)

    def restore(self, state):
        self.got = list(state)


class ReadFlushXQP(Protocol):
    name, expect = "read_flush_xqp", "clean"
    signature_knobs = ("knobs.mr_relaxed", "knobs.atomic_mode", "knobs.adaptive_routing", "topology.num_qps")

    def flush_op(self, scn, layout, c, qp, n):
        return ops.Read(qp, ops.DATA, layout.slot_offset(c, 0) + n * layout.token_bytes - 8, 8)

    def sender(self, scn, layout, epoch):
        progs = []
        for c in range(layout.num_channels):
            qp, n = scn.qp_of_channel(c), layout.tokens_in_channel[c]
            prog = []
            if n:
                prog += [ops.Write(qp, ops.DATA, layout.slot_offset(c, 0), n * layout.token_bytes),
                         self.flush_op(scn, layout, c, qp, n), ops.Flush(qp)]
            prog.append(ops.WriteValue((qp + 1) % scn.topology.num_qps, ops.SIGNAL, c * 8, epoch + 1))
            progs.append(prog)
        return progs

    def receiver(self, scn, layout):
        return FlagReceiver(layout)


class AtomicFlushXQP(ReadFlushXQP):
    name, expect = "atomic_flush_xqp", _C2B

    def flush_op(self, scn, layout, c, qp, n):
        return ops.AtomicAdd(qp, ops.RECV, c * layout.max_signals * 16, 0)


class AtomicFenceSameQP(ReadFlushXQP):
    name, expect = "atomic_fence_same_qp", _C2B

    def sender(self, scn, layout, epoch):
        progs = []
        for c in range(layout.num_channels):
            qp, n = scn.qp_of_channel(c), layout.tokens_in_channel[c]
            prog = []
            if n:
                prog += [ops.Write(qp, ops.DATA, layout.slot_offset(c, 0), n * layout.token_bytes),
                         ops.AtomicAdd(qp, ops.RECV, c * layout.max_signals * 16, 0)]
            prog.append(ops.WriteValue(qp, ops.SIGNAL, c * 8, epoch + 1, fence=True))
            progs.append(prog)
        return progs
