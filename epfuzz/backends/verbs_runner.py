"""The verbs runner: a scenario's epochs on two RDMA devices, the protocol's receiver looking on.

Per epoch: the epoch start (source image, poison, reset, receives), the channels'
ops posted as RDMA WRITE / WRITE_WITH_IMM / ATOMIC FETCH_AND_ADD / SEND / READ with
fences, the protocol's own receiver polling the receiver's MR between the posts
and after them, the oracle on whatever it consumes (`_judge`), and a drain that
waits for every completion. Resources come from `verbs_wiring.py`, tc shaping from `verbs_net.py`.
The payload and the oracle are the sim's. Only imported where pyverbs exists (an RDMA host, the guest).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyverbs.enums as e
from pyverbs.wr import SGE, RecvWR, SendWR

from epfuzz.backends.verbs_net import setup_rxe_pair, shape
from epfuzz.backends.verbs_wiring import RO_FLAG, Devices, Wiring
from epfuzz.infra.errors import HarnessError, Unsupported
from epfuzz.ir import ops
from epfuzz.ir.payload import canary
from epfuzz.model.epoch import expected_data
from epfuzz.model.oracle import Violation, judge
from epfuzz.protocols.base import Consume, Protocol, Receiver, apply_spins
from epfuzz.protocols.opcheck import check_programs

if TYPE_CHECKING:
    from epfuzz.ir.scenario import Scenario

EPOCH_TIMEOUT_S = 20.0
STALL_S = 4.0  # completions stop for this long: the run is stuck (VerbsRunner._wait)
#: soft-RoCE under TCG, driven from Python, is orders of magnitude slower than an HCA: injected
#: per-QP delays (ns in the scenario) are stretched by this, so 65,535 ns becomes 65 ms
DELAY_SCALE = 1000
MASK64 = (1 << 64) - 1
#: sender-MR scratch offsets past the regions (4 KiB): WriteValue and SEND sources, atomic and READ results
SRC_VALUE, SRC_ATOMIC, SRC_SEND, SRC_READ = 64, 128, 256, 512


@dataclass(frozen=True)
class Consumer:
    """The op a receive completion on a QP stands for: RC completes a QP's receives in the order
    its SENDs and WRITE_WITH_IMMs were posted, so the n-th completion is the n-th such op. The
    protocol's CQ entry is the posting channel's `slot`, as the sim reads it (ops.WriteImm)."""

    channel: int
    slot: int
    send: bool                    # a SEND (its message is copied into the recv region) or a WRITE_WITH_IMM


@dataclass
class EpochRun:
    """One epoch: the sender's programs, the receiver, and what has completed so far."""

    number: int
    expected: np.ndarray
    rx: Receiver
    programs: list[list[ops.Op]]
    consumers: list[list[Consumer]]   # per QP, in posting order
    deadline: float = 0.0                                # the receiver gives up (hang) after this
    looking: bool = True                                 # the receiver has not finished nor found anything
    posted: list[int] = field(default_factory=list)     # send WRs posted, per QP
    completed: list[int] = field(default_factory=list)  # their completions seen, per QP
    received: list[int] = field(default_factory=list)   # receive completions seen, per QP
    errors: list[str] = field(default_factory=list)     # completions with an error status
    result: Violation | None = None

    def __post_init__(self) -> None:
        n = len(self.consumers)
        self.posted, self.completed, self.received = [0] * n, [0] * n, [0] * n


def schedule(programs: list[list[ops.Op]]) -> Iterator[tuple[int, ops.Op]]:
    """The channels' programs interleaved one op at a time (GPU warps posting at once)."""
    pc = [0] * len(programs)
    while any(pc[c] < len(p) for c, p in enumerate(programs)):
        for c, prog in enumerate(programs):
            if pc[c] < len(prog):
                yield c, prog[pc[c]]
                pc[c] += 1


class VerbsRunner:
    """Runs scenarios on two RDMA devices in this kernel (pyverbs)."""

    def __init__(self, devices: Devices) -> None:
        self.dev = devices

    @staticmethod
    def _shaping(w: Wiring) -> dict[int, tuple[int, int]]:
        """Receiver QPN -> (delay ns, rate divisor) of each QP the scenario delays or throttles."""
        f = w.scn.faults
        per_qp = {}
        for q, (_, rq) in enumerate(w.pairs):
            delay = f.qp_delay_ns[q] * DELAY_SCALE if q < len(f.qp_delay_ns) else 0
            div = f.qp_rate_div[q] if q < len(f.qp_rate_div) else 1
            if delay or div > 1:
                per_qp[rq.qp_num] = (delay, div)
        return per_qp

    def run(self, scn: Scenario, proto: Protocol, repeats: int) -> dict[str, Any]:
        """The scenario `repeats` times; each repeat starts from epoch 0 with fresh memory and its
        own payload stamp, and ends only when every work request it posted has completed."""
        w = self.dev.wire(scn, proto)
        netdev = self.dev.netdev
        if netdev:
            shape(netdev, self._shaping(w), scn.faults.port_rate_div)
        found = 0
        first: Violation | None = None
        try:
            for r in range(repeats):
                v = self._once(w, r)
                if v is not None:
                    found += 1
                    first = first or v
        except BaseException:
            self.dev.discard()  # its QPs may be in error or still hold work
            raise
        return {"runs": repeats, "hits": found, "violation": first.to_dict() if first else None,
                "summary": first.summary() if first else "", "ro_accepted": bool(scn.knobs.mr_relaxed and RO_FLAG)}

    def _once(self, w: Wiring, repeat: int) -> Violation | None:
        for epoch in range(w.scn.payload.epochs):
            ep = self._start_epoch(w, epoch, repeat)
            ep.deadline = time.monotonic() + EPOCH_TIMEOUT_S
            self._post_epoch(w, ep)
            self._wait(w, ep, lambda ep=ep: not ep.looking, "the receiver", total=float("inf"))  # _wait looks
            self._drain(w, ep)
            if ep.result is not None:
                return ep.result
        return None

    def _start_epoch(self, w: Wiring, epoch: int, repeat: int) -> EpochRun:
        """Epoch start: the sender's source image, the slots poisoned and the signal words, CQ and
        receive slots reset as the protocol asks (everything at a repeat's epoch 0), the receiver's
        prologue stores, one receive posted per SEND / WRITE_WITH_IMM of the epoch.

        The payload carries the repeat as its source stamp: bytes of an earlier repeat that land
        late differ from this one's and fail the oracle. (The epoch number stays the protocol's
        call number, which receivers with monotonic counters count from 0.)"""
        lay, proto, rmr = w.lay, w.proto, w.rmr
        exp = expected_data(lay, epoch, repeat & 0xFFFF)
        w.smr.write(exp.tobytes(), exp.size, w.base[ops.DATA])
        if proto.poison or epoch == 0:
            cn = canary(epoch, lay.sizes[ops.DATA]).tobytes()
            rmr.write(cn, len(cn), w.base[ops.DATA])
        if proto.reset_signals or epoch == 0:
            for region in (ops.SIGNAL, ops.CQ, ops.RECV):
                n = lay.sizes[region]
                if n:
                    rmr.write(bytes(n), n, w.base[region])
        # the receiver's own stores before the epoch's traffic (a CPU store before the sender posts:
        # the in-order case of the sim's prologue, which may also let an unordered one land late)
        for region, offset, value, _ordered in proto.epoch_prologue(w.scn, lay, epoch):
            rmr.write((value & MASK64).to_bytes(8, "little"), 8, w.base[region] + offset)
        rx = proto.receiver(w.scn, lay)
        rx.start_epoch(epoch)
        programs = apply_spins(proto.sender(w.scn, lay, epoch), w.scn)
        name = w.scn.protocol or proto.name or type(proto).__name__
        check_programs(programs, lay, name, epoch, sender=proto.sender)  # as the sim checks them
        consumers: list[list[Consumer]] = [[] for _ in w.pairs]
        for c, op in schedule(programs):
            if isinstance(op, ops.WriteImm | ops.Send):
                slot = op.cq_slot if isinstance(op, ops.WriteImm) else op.slot
                consumers[op.qp % len(w.pairs)].append(Consumer(c, slot, isinstance(op, ops.Send)))
        for q, (_, rq) in enumerate(w.pairs):
            if len(consumers[q]) > w.recvs:
                raise HarnessError(f"verbs: {len(consumers[q])} completion signals on QP {q} in one epoch; "
                                   f"the receive ring holds {w.recvs}")
            for i in range(len(consumers[q])):
                wr_id = q * w.recvs + i
                rq.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                                    sg=[SGE(rmr.buf + w.staging + wr_id * 16, 16, rmr.lkey)]))
        return EpochRun(epoch, exp, rx, programs, consumers)

    def _look(self, w: Wiring, ep: EpochRun) -> bool:
        """One poll of the protocol's receiver at the MR; False once it has finished, found a
        violation or given up. The sender calls it between posts, while it spins and while it
        waits, then until it returns False: the receiver looks far more often than a second
        Python thread would, which under the GIL got the CPU in 5 ms slices (and whose start
        alone cost 20-30 ms a run under TCG)."""
        if not ep.looking:
            return False
        if any(ep.consumers):
            self._mirror_cq(w, ep)
        for consume in ep.rx.poll(w.mem, ep.number):
            v = self._judge(w, ep, consume)
            if v is not None:
                ep.result, ep.looking = v, False
                return False
        if ep.rx.done():
            ep.looking = False
        elif time.monotonic() > ep.deadline:
            ep.result = Violation("hang", w.scn.protocol, ep.number, -1, "receiver never saw every final signal")
            ep.looking = False
        return ep.looking

    @staticmethod
    def _judge(w: Wiring, ep: EpochRun, consume: Consume) -> Violation | None:
        """The shared receiver-step verdict (oracle.judge), on the MR's bytes as the receiver sees them."""
        region = np.frombuffer(w.mem.read(consume.region, 0, w.lay.sizes[consume.region]), dtype=np.uint8)
        return judge(consume, region, ep.expected, w.lay, w.scn.protocol, ep.number)

    @staticmethod
    def _mirror_cq(w: Wiring, ep: EpochRun) -> int:
        """The HCA's receive completions, mirrored into the protocol's CQ region as the sim writes
        them (entry `slot` of the posting channel: epoch + 1, the value's two halves, the QP); a
        SEND's message is first copied to the same entry of the recv region. Returns how many."""
        lay, rmr = w.lay, w.rmr
        nc, wcs = w.cqs[1].poll(16)
        for wc in wcs[:nc]:
            q = w.qp_index(wc.qp_num)
            if wc.status != e.IBV_WC_SUCCESS:
                ep.errors.append(f"receive on QP {q}: status {wc.status}")
            n = ep.received[q]
            ep.received[q] += 1
            if n >= len(ep.consumers[q]):
                ep.errors.append(f"receive on QP {q}: a completion no op of this epoch stands for")
                continue
            who = ep.consumers[q][n]
            entry = (who.channel * lay.max_signals + who.slot) * 16
            if who.send:
                msg = rmr.read(8, w.staging + wc.wr_id * 16)
                rmr.write(msg, 8, w.base[ops.RECV] + entry)
                value = int.from_bytes(msg, "little")
            else:
                value = wc.imm_data & 0xFFFFFFFF
            words = np.array([ep.number + 1, value & 0xFFFFFFFF, value >> 32, q], dtype="<u4")
            rmr.write(words.tobytes(), 16, w.base[ops.CQ] + entry)
        return nc

    @staticmethod
    def _reap_sends(w: Wiring, ep: EpochRun) -> int:
        """Count the sender's completions per QP; returns how many."""
        nc, wcs = w.cqs[0].poll(16)
        for wc in wcs[:nc]:
            q = w.qp_index(wc.qp_num)
            ep.completed[q] += 1
            if wc.status != e.IBV_WC_SUCCESS:
                ep.errors.append(f"send on QP {q}: status {wc.status}")
        return nc

    def _post_epoch(self, w: Wiring, ep: EpochRun) -> None:
        """The channels' programs, posted in `schedule` order, the receiver looking in between."""
        for _, op in schedule(ep.programs):
            self._look(w, ep)
            if isinstance(op, ops.Spin):
                end = time.perf_counter_ns() + op.ns
                while time.perf_counter_ns() < end:
                    self._look(w, ep)
            elif isinstance(op, ops.Flush):  # wait until every WR posted so far on the QP completed locally
                q = op.qp % len(w.pairs)
                self._wait(w, ep, lambda q=q: ep.completed[q] >= ep.posted[q], "a flush")
            elif isinstance(op, ops.GPU_OPS):  # verbs.refusal refused these on the host: sim only
                raise Unsupported(f"backend verbs: {type(op).__name__} is the sim's alone")
            else:
                q = op.qp % len(w.pairs)
                w.pairs[q][0].post_send(work_request(w, op))
                ep.posted[q] += 1

    def _wait(self, w: Wiring, ep: EpochRun, done: Callable[..., bool], what: str,
              total: float = EPOCH_TIMEOUT_S) -> None:
        """Wait for completions; rxe on a loaded TCG host now and then never completes a run (even
        unshaped): it says nothing (Unsupported: a harness skips it; `run` discards the QPs) after
        STALL_S with work outstanding and no completion, or `total` s. The receiver waits here too
        (a stuck run cost 24 s: its 20 s deadline, then the drain's 4); with nothing outstanding
        only its deadline (a hang) ends it."""
        start = seen = time.monotonic()
        progress = -1
        while not done():
            now, completions = time.monotonic(), sum(ep.completed) + sum(ep.received)
            if completions != progress:
                progress, seen = completions, now
            sends, recvs = sum(ep.posted) - sum(ep.completed), sum(map(len, ep.consumers)) - sum(ep.received)
            if (sends + recvs > 0 and now - seen > STALL_S) or now - start > total:
                raise Unsupported(f"backend verbs: {what} saw no completion for {now - seen:.0f} s ({now - start:.0f} "
                                  f"s in all): {sends} sends and {recvs} receives outstanding; the run is inconclusive")
            if not self._reap_sends(w, ep) and not self._look(w, ep):
                time.sleep(0.0005)

    def _drain(self, w: Wiring, ep: EpochRun) -> None:
        """Wait for the completion of every WR the epoch posted and of every receive it consumes
        (the receiver has stopped looking), so nothing of this epoch lands in the next one."""
        def finished() -> bool:
            self._mirror_cq(w, ep)
            return ep.completed == ep.posted and all(
                n >= len(c) for n, c in zip(ep.received, ep.consumers, strict=True))

        self._wait(w, ep, finished, "the end of the epoch")
        if ep.errors:
            raise HarnessError("verbs: work requests completed in error: " + "; ".join(ep.errors[:4]))


def work_request(w: Wiring, op: ops.Op) -> SendWR:
    """The send WR of one op; sources of values live in the sender MR past the regions."""
    smr, rmr, base, scratch = w.smr, w.rmr, w.base, w.staging
    flags = e.IBV_SEND_FENCE if getattr(op, "fence", False) else 0
    if isinstance(op, ops.Write | ops.Read):  # a READ's bytes come back into the sender's scratch, unjudged
        src = smr.buf + (base[op.region] + op.offset + op.shift if isinstance(op, ops.Write) else scratch + SRC_READ)
        wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE if isinstance(op, ops.Write) else e.IBV_WR_RDMA_READ, num_sge=1,
                    sg=[SGE(src, op.length, smr.lkey)], send_flags=flags)
    elif isinstance(op, ops.WriteValue):
        smr.write(op.value.to_bytes(8, "little"), 8, scratch + SRC_VALUE)
        wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(smr.buf + scratch + SRC_VALUE, 8, smr.lkey)],
                    send_flags=flags | e.IBV_SEND_INLINE)
    elif isinstance(op, ops.AtomicAdd):
        wr = SendWR(opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                    sg=[SGE(smr.buf + scratch + SRC_ATOMIC, 8, smr.lkey)], send_flags=flags)
        wr.set_wr_atomic(rkey=rmr.rkey, addr=rmr.buf + base[op.region] + op.offset,
                         compare_add=op.delta & MASK64, swap=0)
        return wr
    elif isinstance(op, ops.WriteImm):  # its bytes (if any) are this epoch's payload, as the sim copies them
        wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                    sg=[SGE(smr.buf + base[op.region] + op.offset, max(op.length, 0), smr.lkey)],
                    send_flags=flags, imm_data=op.imm & 0xFFFFFFFF)
    elif isinstance(op, ops.Send):  # the message lands in a receive slot; the receiver copies it
        smr.write(op.value.to_bytes(8, "little"), 8, scratch + SRC_SEND)
        return SendWR(opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(smr.buf + scratch + SRC_SEND, 8, smr.lkey)],
                      send_flags=flags)
    else:  # a copy-engine copy (or a READ too long): `verbs.refusal` stops it on the host first
        raise Unsupported(f"backend verbs: no verbs form for {op!r}")
    wr.set_wr_rdma(rmr.rkey, rmr.buf + base[op.region] + op.offset)
    return wr


_runner: VerbsRunner | None = None


def local_runner() -> VerbsRunner:
    """The runner of this process (devices and resources are reused across runs).

    Real HCA: EPFUZZ_VERBS_DEVICES=send,recv (one name for loopback), EPFUZZ_VERBS_GID, and
    EPFUZZ_VERBS_NETDEV for tc delays; otherwise the rxe pair of the guest."""
    global _runner
    if _runner is None:
        devs = os.environ.get("EPFUZZ_VERBS_DEVICES")
        if devs:
            send, _, recv = devs.partition(",")
            dev = Devices(send, recv or send, int(os.environ.get("EPFUZZ_VERBS_GID", "1")))
            dev.netdev = os.environ.get("EPFUZZ_VERBS_NETDEV") or None
        else:
            dev = Devices(*setup_rxe_pair())
        _runner = VerbsRunner(dev)
    return _runner
