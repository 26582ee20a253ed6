"""An author's trial plug-in (/work/trial-author/w/chunklanes.py, copied unchanged but for these two lines): a protocol
whose `expect` is a mapping by preset, for `epfuzz corpus manifest` (tests/continuous/test_plugin_manifest.py).
(c) Multi-chunk tokens: every token is sent in 2 chunks (halves); chunk h of every token goes on QP
(q + h) % Q, each chunk followed, on the same QP, by a fetch-and-add of 1 into lane h of the channel's signal
word (lane h = bits 32h..32h+31: a per-chunk-index counter). Token i is consumed once both lanes reach i + 1.
At the end the sender posts a final tail: a zero-length WRITE_WITH_IMM on QP q with imm = n (the token count).
- ChunkLanes: the tail only tells the receiver the count; tokens are consumed by the lane counters alone.
- ChunkLanesTrustTail: on the tail the receiver also consumes every token not yet consumed (an 'end of stream'
  shortcut)."""
from epfuzz.ir import ops
from epfuzz.protocols.base import Consume, Protocol, Receiver

LANE = 1 << 32


class LaneReceiver(Receiver):
    watch = frozenset({ops.SIGNAL, ops.CQ})

    def __init__(self, layout, trust_tail):
        self.layout, self.trust_tail = layout, trust_tail
        self.next = [0] * layout.num_channels
        self.tail = [False] * layout.num_channels

    def start_epoch(self, epoch):
        self.next = [0] * self.layout.num_channels
        self.tail = [False] * self.layout.num_channels

    def poll(self, mem, epoch):
        lay, out = self.layout, []
        for c in range(lay.num_channels):
            n = lay.tokens_in_channel[c]
            w = mem.u64(ops.SIGNAL, c * 8)
            ready = min(w & (LANE - 1), w >> 32, n)
            if not self.tail[c]:
                valid, imm, _, _ = mem.u32x4(ops.CQ, c * lay.max_signals * 16)
                if valid == epoch + 1 and imm == n:
                    self.tail[c] = True
            if self.tail[c] and self.trust_tail:
                ready = n
            if ready > self.next[c]:
                out.append(Consume(ops.DATA, lay.slot_offset(c, self.next[c]), (ready - self.next[c]) * lay.token_bytes,
                                   c, f"tokens [{self.next[c]}, {ready}) of channel {c}"))
                self.next[c] = ready
        return out

    def done(self):
        return all(t and k == n for t, k, n in zip(self.tail, self.next, self.layout.tokens_in_channel))

    def state(self):
        return (tuple(self.next), tuple(self.tail))

    def restore(self, state):
        nx, tl = state
        self.next, self.tail = list(nx), list(tl)


class ChunkLanes(Protocol):
    name = "chunk_lanes"
    # my ground truth: each lane's +1 follows its chunk on that chunk's QP: safe unless C2b (mode 4 + RO + no o9-20)
    expect = {"spec": "finding", "mlx5-pci-atomic": "finding", "mlx5-ro-only": "finding", "*": "clean"}
    trust_tail = False
    signature_knobs = ("knobs.mr_relaxed", "knobs.atomic_mode", "knobs.adaptive_routing", "topology.num_qps")

    def sender(self, scn, layout, epoch):
        progs, Q, tb = [], scn.topology.num_qps, layout.token_bytes
        half = (tb // 2) // 16 * 16 or tb
        for c in range(layout.num_channels):
            q, n = scn.qp_of_channel(c), layout.tokens_in_channel[c]
            prog = []
            for i in range(n):
                off = layout.slot_offset(c, i)
                pieces = [(0, half), (half, tb - half)] if half < tb else [(0, tb), None]
                for h, piece in enumerate(pieces):
                    qp = (q + h) % Q
                    if piece is not None:
                        prog.append(ops.Write(qp, ops.DATA, off + piece[0], piece[1]))
                    prog.append(ops.AtomicAdd(qp, ops.SIGNAL, c * 8, LANE ** h))
            prog.append(ops.WriteImm(q, ops.DATA, layout.slot_offset(c, 0), 0, imm=n, cq_slot=0))
            progs.append(prog)
        return progs

    def receiver(self, scn, layout):
        return LaneReceiver(layout, self.trust_tail)


class ChunkLanesTrustTail(ChunkLanes):
    name = "chunk_lanes_trust_tail"
    expect = "finding"        # the tail CQE orders only QP q's data; chunk 1 rides QP q+1 (xQP) on every preset
    trust_tail = True
