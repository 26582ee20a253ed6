"""The verbs runner: a scenario's epochs on two RDMA devices, the protocol's receiver in a thread.

Per epoch: the epoch start (source image, poison, reset, receives), the channels'
ops posted as RDMA WRITE / WRITE_WITH_IMM / ATOMIC FETCH_AND_ADD / SEND with
fences, the protocol's own receiver polling the receiver's MR while the sender
posts, and the oracle on whatever it consumes (`_judge`). Resources come from
`verbs_wiring.py`, tc shaping from `verbs_net.py`. The payload and the oracle are
the sim's. Only imported where pyverbs exists (an RDMA host, or the epfuzz guest).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyverbs.enums as e
from pyverbs.wr import SGE, RecvWR, SendWR

from epfuzz import ops
from epfuzz.backends.verbs_net import setup_rxe_pair, shape
from epfuzz.backends.verbs_wiring import RO_FLAG, Devices, Wiring
from epfuzz.errors import HarnessError
from epfuzz.oracle import Violation, check
from epfuzz.payload import canary
from epfuzz.protocols.base import Consume, Protocol, Receiver, apply_spins
from epfuzz.sim.memory import expected_data

if TYPE_CHECKING:
    from epfuzz.scenario import Scenario

EPOCH_TIMEOUT_S = 20.0
#: soft-RoCE under TCG, driven from Python, is orders of magnitude slower than an HCA: injected
#: per-QP delays (ns in the scenario) are stretched by this, so 65,535 ns becomes 65 ms
DELAY_SCALE = 1000
#: sender-MR scratch offsets (past the regions) of the sources of WriteValue, atomics' results,
#: WriteImm and SEND payloads
SRC_VALUE, SRC_ATOMIC, SRC_IMM, SRC_SEND = 64, 128, 192, 256


@dataclass
class EpochRun:
    """One epoch, shared by the posting thread and the receiver thread."""

    number: int
    expected: np.ndarray
    rx: Receiver
    stop: threading.Event
    result: Violation | None = None


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

    def run(self, scn: Scenario, proto: Protocol, repeats: int) -> dict[str, object]:
        w = self.dev.wire(scn, proto)
        netdev = self.dev.netdev
        if netdev:
            shape(netdev, self._shaping(w), scn.faults.port_rate_div)
        found = 0
        first: Violation | None = None
        try:
            for _ in range(repeats):
                v = self._once(w)
                if v is not None:
                    found += 1
                    first = first or v
        finally:
            if netdev:
                shape(netdev, {}, 1)
        return {"runs": repeats, "hits": found, "violation": first.to_dict() if first else None,
                "summary": first.summary() if first else "", "ro_accepted": bool(scn.knobs.mr_relaxed and RO_FLAG)}

    def _once(self, w: Wiring) -> Violation | None:
        for epoch in range(w.scn.payload.epochs):
            ep = self._start_epoch(w, epoch)
            t = threading.Thread(target=self._receive, args=(w, ep), daemon=True)
            t.start()
            self._post_epoch(w, epoch)
            t.join(EPOCH_TIMEOUT_S + 5)
            ep.stop.set()
            self._drain(w)
            if ep.result is not None:
                return ep.result
        return None

    def _start_epoch(self, w: Wiring, epoch: int) -> EpochRun:
        """Epoch start: the sender's source image, the slots poisoned and the signal words, CQ and
        receive slots reset as the protocol asks, receives posted for completion signals."""
        lay, proto, rmr = w.lay, w.proto, w.rmr
        exp = expected_data(lay, epoch)
        w.smr.write(exp.tobytes(), exp.size, w.base[ops.DATA])
        if proto.poison or epoch == 0:
            cn = canary(epoch, lay.sizes[ops.DATA]).tobytes()
            rmr.write(cn, len(cn), w.base[ops.DATA])
        if proto.reset_signals or epoch == 0:
            for region in (ops.SIGNAL, ops.CQ, ops.RECV):
                n = lay.sizes[region]
                if n:
                    rmr.write(bytes(n), n, w.base[region])
        rx = proto.receiver(w.scn, lay)
        rx.start_epoch(epoch)
        if rx.watch & {ops.CQ}:  # receives for SEND / WRITE_WITH_IMM, landing in the receiver's MR
            for q, (_, rq) in enumerate(w.pairs):
                for i in range(w.recvs):
                    wr_id = q * w.recvs + i
                    rq.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                                        sg=[SGE(rmr.buf + w.staging + wr_id * 16, 16, rmr.lkey)]))
        return EpochRun(epoch, exp, rx, threading.Event())

    def _receive(self, w: Wiring, ep: EpochRun) -> None:
        """The protocol's receiver, polling the MR while the sender posts (a thread)."""
        deadline = time.monotonic() + EPOCH_TIMEOUT_S
        k = [0] * w.lay.num_channels
        while not ep.stop.is_set():
            if ep.rx.watch & {ops.CQ}:
                self._mirror_cq(w, ep, k)
            for consume in ep.rx.poll(w.mem, ep.number):
                v = self._judge(w, ep, consume)
                if v is not None:
                    ep.result = v
                    return
            if ep.rx.done():
                return
            if time.monotonic() > deadline:
                ep.result = Violation("hang", w.scn.protocol, ep.number, -1, "receiver never saw every final signal")
                return

    @staticmethod
    def _judge(w: Wiring, ep: EpochRun, consume: Consume) -> Violation | None:
        """The oracle on what the receiver just consumed (expected bytes only for the data region)."""
        region = np.frombuffer(w.mem.read(consume.region, 0, w.lay.sizes[consume.region]), dtype=np.uint8)
        return check(consume, region, ep.expected if consume.region == ops.DATA else None, w.lay,
                     w.scn.protocol, ep.number)

    @staticmethod
    def _mirror_cq(w: Wiring, ep: EpochRun, k: list[int]) -> None:
        """The HCA's receive completions, mirrored into the protocol's CQ region (`k`: the next CQ
        entry of each channel); a SEND's message is copied where the protocol reads it."""
        lay, rmr = w.lay, w.rmr
        with w.cq_lock:
            nc, wcs = w.cqs[1].poll(16)
        for wc in wcs[:nc]:
            if wc.opcode == e.IBV_WC_RECV_RDMA_WITH_IMM:
                imm = wc.imm_data & 0xFFFFFFFF
                c = imm >> 24
            elif wc.opcode == e.IBV_WC_RECV:
                msg = rmr.read(16, w.staging + wc.wr_id * 16)
                c = (int.from_bytes(msg[:8], "little") >> 8) & 0xFF
                imm = 0
                rmr.write(msg, 16, w.base[ops.RECV] + (c * lay.max_signals + k[c]) * 16)
            else:
                continue
            entry = np.array([ep.number + 1, imm, 0, wc.qp_num], dtype="<u4")
            rmr.write(entry.tobytes(), 16, w.base[ops.CQ] + (c * lay.max_signals + k[c]) * 16)
            k[c] += 1

    def _post_epoch(self, w: Wiring, epoch: int) -> None:
        """The channels' programs, posted round-robin one op at a time (GPU warps posting at once)."""
        programs = apply_spins(w.proto.sender(w.scn, w.lay, epoch), w.scn)
        pc = [0] * len(programs)
        posted = [0] * len(w.pairs)
        done = [0] * len(w.pairs)
        while any(pc[c] < len(p) for c, p in enumerate(programs)):
            for c, prog in enumerate(programs):
                if pc[c] >= len(prog):
                    continue
                op = prog[pc[c]]
                pc[c] += 1
                if isinstance(op, ops.Spin):
                    end = time.perf_counter_ns() + op.ns
                    while time.perf_counter_ns() < end:
                        pass
                elif isinstance(op, ops.Flush):
                    self._flush(w, op.qp % len(w.pairs), posted, done)
                else:
                    q = op.qp % len(w.pairs)
                    w.pairs[q][0].post_send(self._work_request(w, op))
                    posted[q] += 1

    @staticmethod
    def _flush(w: Wiring, q: int, posted: list[int], done: list[int]) -> None:
        """Wait until every WR posted so far on QP q has completed locally."""
        deadline = time.monotonic() + EPOCH_TIMEOUT_S
        while done[q] < posted[q]:
            if time.monotonic() > deadline:
                raise HarnessError("verbs: a flush never saw its completions (QP in error?)")
            with w.cq_lock:
                nc, wcs = w.cqs[0].poll(16)
            for wc in wcs[:nc]:
                done[w.qp_index(wc.qp_num)] += 1

    @staticmethod
    def _work_request(w: Wiring, op: ops.Op) -> SendWR:
        """The send WR of one op; sources of values live in the sender MR past the regions."""
        smr, rmr, base, scratch = w.smr, w.rmr, w.base, w.staging
        flags = e.IBV_SEND_FENCE if getattr(op, "fence", False) else 0
        if isinstance(op, ops.Write):
            wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                        sg=[SGE(smr.buf + base[op.region] + op.offset + op.shift, op.length, smr.lkey)],
                        send_flags=flags)
        elif isinstance(op, ops.WriteValue):
            smr.write(op.value.to_bytes(8, "little"), 8, scratch + SRC_VALUE)
            wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(smr.buf + scratch + SRC_VALUE, 8, smr.lkey)],
                        send_flags=flags | e.IBV_SEND_INLINE)
        elif isinstance(op, ops.AtomicAdd):
            wr = SendWR(opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                        sg=[SGE(smr.buf + scratch + SRC_ATOMIC, 8, smr.lkey)], send_flags=flags)
            wr.set_wr_atomic(rkey=rmr.rkey, addr=rmr.buf + base[op.region] + op.offset,
                             compare_add=op.delta & ((1 << 64) - 1), swap=0)
            return wr
        elif isinstance(op, ops.WriteImm):
            wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                        sg=[SGE(smr.buf + scratch + SRC_IMM, max(op.length, 0), smr.lkey)],
                        send_flags=flags, imm_data=op.imm & 0xFFFFFFFF)
        elif isinstance(op, ops.Send):  # the message lands in a receive slot; the receiver copies it
            smr.write(op.value.to_bytes(8, "little"), 8, scratch + SRC_SEND)
            return SendWR(opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(smr.buf + scratch + SRC_SEND, 8, smr.lkey)],
                          send_flags=flags)
        else:  # pragma: no cover
            raise TypeError(op)
        wr.set_wr_rdma(rmr.rkey, rmr.buf + base[op.region] + op.offset)
        return wr

    @staticmethod
    def _drain(w: Wiring) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with w.cq_lock:
                n0, _ = w.cqs[0].poll(64)
                n1, _ = w.cqs[1].poll(64)
            if not n0 and not n1:
                time.sleep(0.01)
                with w.cq_lock:
                    m0, _ = w.cqs[0].poll(64)
                if not m0:
                    return


def local_runner() -> VerbsRunner:
    """Real HCA: EPFUZZ_VERBS_DEVICES=send,recv (one name for loopback), EPFUZZ_VERBS_GID, and
    EPFUZZ_VERBS_NETDEV for tc delays; otherwise the rxe pair of the guest."""
    devs = os.environ.get("EPFUZZ_VERBS_DEVICES")
    if devs:
        send, _, recv = devs.partition(",")
        dev = Devices(send, recv or send, int(os.environ.get("EPFUZZ_VERBS_GID", "1")))
        dev.netdev = os.environ.get("EPFUZZ_VERBS_NETDEV") or None
        return VerbsRunner(dev)
    send, recv = setup_rxe_pair()
    return VerbsRunner(Devices(send, recv))
