"""`verbs`: the protocols on real RDMA verbs through pyverbs (soft-RoCE rxe, or an HCA).

Where pyverbs and an RDMA device exist (a host with rdma_rxe or mlx5, or the
epfuzz guest), `VerbsRunner` runs a scenario directly: two RDMA devices (sender,
receiver), RC QP pairs as the scenario asks, the receiver's regions in one MR
registered with or without IBV_ACCESS_RELAXED_ORDERING, the protocol's ops posted
as RDMA WRITE / WRITE_WITH_IMM / ATOMIC FETCH_AND_ADD / SEND with fences, and the
protocol's own receiver polling the MR while the sender posts. The oracle and the
payload are the sim's. Per-QP delay and throttling (faults.qp_delay_ns,
qp_rate_div) and the port throttle (port_rate_div) are real: a prio qdisc with a
u32 filter on the BTH destination QPN puts each shaped QP's packets behind netem.

Elsewhere (this machine: no RDMA in the kernel) `run` boots the epfuzz QEMU guest
(epfuzz/vm.py) and runs the scenario there. A scenario repeats R times; the
verdict is found in k of R.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from epfuzz import ops
from epfuzz.backends.base import Backend, Outcome, Where
from epfuzz.errors import BackendUnavailable, EpfuzzError, HarnessError
from epfuzz.oracle import Violation, check
from epfuzz.payload import canary
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Layout, Protocol, apply_spins
from epfuzz.scenario import Scenario
from epfuzz.sim.memory import expected_data

IP = {"veth0": "198.18.0.1", "veth1": "198.18.0.2"}  # benchmark range; it never leaves the guest
EPOCH_TIMEOUT_S = 20.0
#: soft-RoCE under TCG, driven from Python, is orders of magnitude slower than an HCA: injected
#: per-QP delays (ns in the scenario) are stretched by this, so 65,535 ns becomes 65 ms
DELAY_SCALE = 1000


def rdma_devices() -> list[str]:
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


def _sh(cmd: str) -> None:
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise HarnessError(f"guest setup failed: {cmd}: {p.stderr.strip()}")


def setup_rxe_pair() -> tuple[str, str]:
    """Two rxe devices on a veth pair, routed so RoCE traffic really crosses the netdevs
    (recipe from shared/research/rxe-vm.md); idempotent."""
    if {"rxe_v0", "rxe_v1"} <= set(rdma_devices()):
        return "rxe_v0", "rxe_v1"
    _sh("ip link add veth0 type veth peer name veth1")
    for dev in ("veth0", "veth1"):
        _sh(f"ip addr add {IP[dev]}/32 dev {dev} && ip link set {dev} up")
    _sh(f"ip route add {IP['veth1']}/32 dev veth0 table 100 && ip route add {IP['veth0']}/32 dev veth1 table 101")
    _sh("ip rule add pref 10 oif veth0 lookup 100 && ip rule add pref 11 oif veth1 lookup 101")
    _sh("ip rule add pref 1000 lookup local && ip rule del pref 0 lookup local")
    for dev in ("all", "veth0", "veth1"):
        _sh(f"sysctl -qw net.ipv4.conf.{dev}.accept_local=1 net.ipv4.conf.{dev}.rp_filter=0")
    mac = {d: Path(f"/sys/class/net/{d}/address").read_text().strip() for d in ("veth0", "veth1")}
    _sh(f"ip neigh add {IP['veth1']} lladdr {mac['veth1']} dev veth0 nud permanent")
    _sh(f"ip neigh add {IP['veth0']} lladdr {mac['veth0']} dev veth1 nud permanent")
    _sh("rdma link add rxe_v0 type rxe netdev veth0 && rdma link add rxe_v1 type rxe netdev veth1")
    return "rxe_v0", "rxe_v1"


#: the rate a throttle divisor of 1 stands for on the guest's veth
LINK_MBIT = 1000


def shape(dev: str, per_qp: dict[int, tuple[int, int]], port_div: int) -> None:
    """tc on the sender's netdev: one prio band per shaped QP (netem delay and rate on the packets
    whose BTH destination QPN matches, u32 at offset 32 of the IP packet), everything else through
    the last band (netem rate when the port is throttled). A shaped QP's band is not also under the
    port's rate (a simplification)."""
    subprocess.run(f"tc qdisc del dev {dev} root", shell=True, capture_output=True)
    shaped = sorted(per_qp.items())[:15]
    if not shaped and port_div <= 1:
        return
    n = len(shaped) + 1
    _sh(f"tc qdisc add dev {dev} root handle 1: prio bands {max(n, 2)} priomap " + " ".join([str(n - 1)] * 16))
    default = f"netem rate {LINK_MBIT // port_div}mbit" if port_div > 1 else "pfifo"
    _sh(f"tc qdisc add dev {dev} parent 1:{n} handle {n}0: {default}")
    for band, (qpn, (delay_ns, div)) in enumerate(shaped, start=1):
        rate = f" rate {LINK_MBIT // div}mbit" if div > 1 else ""
        _sh(f"tc qdisc add dev {dev} parent 1:{band} handle {band}0: netem delay {max(1, delay_ns // 1000)}us{rate}")
        _sh(f"tc filter add dev {dev} parent 1: protocol ip prio 1 u32 match u32 {qpn} 0x00ffffff at 32 "
            f"flowid 1:{band}")


class _Mem:
    """The receiver's MR seen through the protocol's MemoryView."""

    def __init__(self, mr: Any, base: dict[str, int]) -> None:
        self.mr = mr
        self.base = base

    def read(self, region: str, offset: int, length: int) -> bytes:
        return self.mr.read(length, self.base[region] + offset)

    def u64(self, region: str, offset: int) -> int:
        return int.from_bytes(self.read(region, offset, 8), "little")

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        w = np.frombuffer(self.read(region, offset, 16), dtype="<u4")
        return int(w[0]), int(w[1]), int(w[2]), int(w[3])


class VerbsRunner:
    """Runs scenarios on two RDMA devices in this kernel (pyverbs)."""

    def __init__(self, send_dev: str, recv_dev: str, gid_index: int = 1) -> None:
        from pyverbs.device import Context
        from pyverbs.pd import PD

        self.ctx = (Context(name=send_dev), Context(name=recv_dev))
        self.pd = tuple(PD(c) for c in self.ctx)
        self.gid_index = gid_index
        self.netdev = "veth0" if send_dev == "rxe_v0" else None

    def _qp_pair(self, cqs: tuple[Any, Any], access: int) -> tuple[Any, Any]:
        import pyverbs.enums as e
        from pyverbs.addr import AHAttr, GlobalRoute
        from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

        cap = QPCap(max_send_wr=1024, max_recv_wr=1024, max_send_sge=1, max_recv_sge=1)
        qps = tuple(QP(self.pd[i], QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqs[i], rcq=cqs[i], cap=cap,
                                              sq_sig_all=1)) for i in (0, 1))
        for i in (0, 1):
            j = 1 - i
            attr = QPAttr()
            attr.qp_access_flags = access
            attr.path_mtu = e.IBV_MTU_1024
            attr.dest_qp_num = qps[j].qp_num
            attr.rq_psn = 0
            attr.sq_psn = 0
            attr.max_dest_rd_atomic = 1
            attr.max_rd_atomic = 1
            attr.min_rnr_timer = 12
            attr.timeout = 14
            attr.retry_cnt = 7
            attr.rnr_retry = 7
            gid = self.ctx[j].query_gid(port_num=1, index=self.gid_index)
            attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=self.gid_index), is_global=1, port_num=1)
            qps[i].to_init(attr)
            qps[i].to_rtr(attr)
            qps[i].to_rts(attr)
        return qps

    def run(self, scn: Scenario, repeats: int) -> dict[str, Any]:
        import pyverbs.enums as e
        from pyverbs.cq import CQ
        from pyverbs.mr import MR
        from pyverbs.wr import SGE, RecvWR, SendWR

        proto = get_protocol(scn.protocol)
        lay: Layout = proto.layout(scn)
        sizes = lay.sizes
        base, off = {}, 0
        for name in ops.REGIONS:
            base[name] = off
            off += (sizes[name] + 63) // 64 * 64
        staging = off                       # SEND landing slots (16 B each), one ring per QP
        recvs = lay.max_signals * lay.num_channels
        off += scn.topology.num_qps * recvs * 16
        total = max(off, 64)
        access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
                  | e.IBV_ACCESS_REMOTE_ATOMIC)
        ro_flag = getattr(e, "IBV_ACCESS_RELAXED_ORDERING", 0)
        rmr = MR(self.pd[1], total, access | (ro_flag if scn.knobs.mr_relaxed else 0))
        smr = MR(self.pd[0], total + 4096, access)
        cqs = (CQ(self.ctx[0], 1024), CQ(self.ctx[1], 1024))
        nq = scn.topology.num_qps
        pairs = [self._qp_pair(cqs, access) for _ in range(nq)]
        f = scn.faults
        per_qp = {}
        for q in range(nq):
            delay = f.qp_delay_ns[q] * DELAY_SCALE if q < len(f.qp_delay_ns) else 0
            div = f.qp_rate_div[q] if q < len(f.qp_rate_div) else 1
            if delay or div > 1:
                per_qp[pairs[q][1].qp_num] = (delay, div)
        if self.netdev:
            shape(self.netdev, per_qp, f.port_rate_div)
        mem = _Mem(rmr, base)
        found = 0
        first: Violation | None = None
        try:
            for _ in range(repeats):
                v = self._once(scn, proto, lay, rmr, smr, cqs, pairs, mem, base, e, SGE, SendWR, RecvWR,
                               staging, recvs)
                if v is not None:
                    found += 1
                    first = first or v
        finally:
            if self.netdev:
                shape(self.netdev, {}, 1)
        return {"runs": repeats, "hits": found, "violation": first.to_dict() if first else None,
                "summary": first.summary() if first else "", "ro_accepted": bool(scn.knobs.mr_relaxed and ro_flag)}

    def _once(self, scn, proto, lay, rmr, smr, cqs, pairs, mem, base, e, SGE, SendWR, RecvWR,  # noqa: ANN001
              staging, recvs):
        for epoch in range(scn.payload.epochs):
            exp = expected_data(lay, epoch)
            smr.write(exp.tobytes(), exp.size, base[ops.DATA])
            if proto.poison or epoch == 0:
                cn = canary(epoch, lay.sizes[ops.DATA]).tobytes()
                rmr.write(cn, len(cn), base[ops.DATA])
            if proto.reset_signals or epoch == 0:
                for region in (ops.SIGNAL, ops.CQ, ops.RECV):
                    n = lay.sizes[region]
                    if n:
                        rmr.write(bytes(n), n, base[region])
            rx = proto.receiver(scn, lay)
            rx.start_epoch(epoch)
            if rx.watch & {ops.CQ}:  # receives for SEND / WRITE_WITH_IMM, landing in the receiver's MR
                for q in range(len(pairs)):
                    for i in range(recvs):
                        wr_id = q * recvs + i
                        pairs[q][1].post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                                                     sg=[SGE(rmr.buf + staging + wr_id * 16, 16, rmr.lkey)]))
            result: list[Violation | None] = [None]
            stop = threading.Event()
            cq_lock = threading.Lock()

            t = threading.Thread(target=self._receive, daemon=True,
                                 args=(scn, lay, rx, epoch, exp, mem, rmr, base, cqs, pairs, cq_lock, stop, result, e,
                                       staging))
            t.start()
            self._post_epoch(scn, proto, lay, smr, rmr, pairs, cqs, base, epoch, e, SGE, SendWR, cq_lock,
                             staging)
            t.join(EPOCH_TIMEOUT_S + 5)
            stop.set()
            self._drain(cqs, cq_lock)
            if result[0] is not None:
                return result[0]
        return None

    @staticmethod
    def _receive(scn, lay, rx, epoch, exp, mem, rmr, base, cqs, pairs, cq_lock, stop, result, e,  # noqa: ANN001
                 staging):
        """The protocol's receiver, polling the MR while the sender posts (a thread)."""
        name = scn.protocol
        deadline = time.monotonic() + EPOCH_TIMEOUT_S
        k = [0] * lay.num_channels
        while not stop.is_set():
            if rx.watch & {ops.CQ}:  # the HCA's CQ, mirrored into the protocol's CQ region
                with cq_lock:
                    nc, wcs = cqs[1].poll(16)
                for wc in wcs[:nc]:
                    if wc.opcode == e.IBV_WC_RECV_RDMA_WITH_IMM:
                        imm = wc.imm_data & 0xFFFFFFFF
                        c = imm >> 24
                    elif wc.opcode == e.IBV_WC_RECV:  # the message: copy it where the protocol reads it
                        msg = rmr.read(16, staging + wc.wr_id * 16)
                        c = (int.from_bytes(msg[:8], "little") >> 8) & 0xFF
                        imm = 0
                        rmr.write(msg, 16, base[ops.RECV] + (c * lay.max_signals + k[c]) * 16)
                    else:
                        continue
                    entry = np.array([epoch + 1, imm, 0, wc.qp_num], dtype="<u4")
                    rmr.write(entry.tobytes(), 16, base[ops.CQ] + (c * lay.max_signals + k[c]) * 16)
                    k[c] += 1
            for consume in rx.poll(mem, epoch):
                region = np.frombuffer(mem.read(consume.region, 0, lay.sizes[consume.region]), dtype=np.uint8)
                v = check(consume, region, exp if consume.region == ops.DATA else None, lay, name, epoch)
                if v is not None:
                    result[0] = v
                    return
            if rx.done():
                return
            if time.monotonic() > deadline:
                result[0] = Violation("hang", name, epoch, -1, "receiver never saw every final signal")
                return

    def _post_epoch(self, scn, proto, lay, smr, rmr, pairs, cqs, base, epoch, e, SGE, SendWR, cq_lock,  # noqa: ANN001
                    scratch):
        """`scratch`: the sender MR's bytes past the regions (where the receiver MR keeps its SEND
        rings), free for the sources of signal writes, atomics' results and SEND payloads."""
        programs = apply_spins(proto.sender(scn, lay, epoch), scn)
        pc = [0] * len(programs)
        posted = [0] * len(pairs)
        done = [0] * len(pairs)
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
                    continue
                if isinstance(op, ops.Flush):
                    q = op.qp % len(pairs)
                    deadline = time.monotonic() + EPOCH_TIMEOUT_S
                    while done[q] < posted[q]:
                        if time.monotonic() > deadline:
                            raise HarnessError("verbs: a flush never saw its completions (QP in error?)")
                        with cq_lock:
                            nc, wcs = cqs[0].poll(16)
                        for wc in wcs[:nc]:
                            done[_qp_index(wc.qp_num, pairs)] += 1
                    continue
                q = op.qp % len(pairs)
                flags = e.IBV_SEND_FENCE if op.fence else 0
                raddr = rmr.buf
                if isinstance(op, ops.Write):
                    wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                                sg=[SGE(smr.buf + base[op.region] + op.offset + op.shift, op.length, smr.lkey)],
                                send_flags=flags)
                    wr.set_wr_rdma(rmr.rkey, raddr + base[op.region] + op.offset)
                elif isinstance(op, ops.WriteValue):
                    smr.write(op.value.to_bytes(8, "little"), 8, scratch + 64)
                    wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(smr.buf + scratch + 64, 8, smr.lkey)],
                                send_flags=flags | e.IBV_SEND_INLINE)
                    wr.set_wr_rdma(rmr.rkey, raddr + base[op.region] + op.offset)
                elif isinstance(op, ops.AtomicAdd):
                    wr = SendWR(opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                                sg=[SGE(smr.buf + scratch + 128, 8, smr.lkey)], send_flags=flags)
                    wr.set_wr_atomic(rkey=rmr.rkey, addr=raddr + base[op.region] + op.offset,
                                     compare_add=op.delta & ((1 << 64) - 1), swap=0)
                elif isinstance(op, ops.WriteImm):
                    wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                                sg=[SGE(smr.buf + scratch + 192, max(op.length, 0), smr.lkey)],
                                send_flags=flags, imm_data=op.imm & 0xFFFFFFFF)
                    wr.set_wr_rdma(rmr.rkey, raddr + base[op.region] + op.offset)
                else:  # Send: the message lands in the recv region; the receiver reads it via its CQ entry
                    smr.write(op.value.to_bytes(8, "little"), 8, scratch + 256)
                    wr = SendWR(opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(smr.buf + scratch + 256, 8, smr.lkey)],
                                send_flags=flags)
                pairs[q][0].post_send(wr)
                posted[q] += 1

    @staticmethod
    def _drain(cqs: tuple[Any, Any], lock: threading.Lock) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with lock:
                n0, _ = cqs[0].poll(64)
                n1, _ = cqs[1].poll(64)
            if not n0 and not n1:
                time.sleep(0.01)
                with lock:
                    m0, _ = cqs[0].poll(64)
                if not m0:
                    return


def _qp_index(qpn: int, pairs: list[tuple[Any, Any]]) -> int:
    for i, (a, b) in enumerate(pairs):
        if qpn in (a.qp_num, b.qp_num):
            return i
    return 0


def local_runner() -> VerbsRunner:
    """Real HCA: EPFUZZ_VERBS_DEVICES=send,recv (one name for loopback), EPFUZZ_VERBS_GID, and
    EPFUZZ_VERBS_NETDEV for tc delays; otherwise the rxe pair of the guest."""
    devs = os.environ.get("EPFUZZ_VERBS_DEVICES")
    if devs:
        send, _, recv = devs.partition(",")
        r = VerbsRunner(send, recv or send, int(os.environ.get("EPFUZZ_VERBS_GID", "1")))
        r.netdev = os.environ.get("EPFUZZ_VERBS_NETDEV") or None
        return r
    send, recv = setup_rxe_pair()
    return VerbsRunner(send, recv)


def guest_main(argv: list[str]) -> int:
    """Inside the guest: run one scenario R times and print a JSON result line."""
    scn = Scenario.from_json(base64.b64decode(argv[0]))
    repeats = int(argv[1])
    res = local_runner().run(scn, repeats)
    print("EPFUZZ-VERBS-RESULT " + json.dumps(res), flush=True)
    return 0


class VerbsBackend(Backend):
    name = "verbs"
    deterministic = False

    def runs_locally(self) -> bool:
        return importlib.util.find_spec("pyverbs") is not None and (
            bool(rdma_devices()) or os.environ.get("EPFUZZ_IN_GUEST") == "1")

    def where(self) -> Where:
        return Where.HERE if self.runs_locally() else Where.GUEST

    def availability(self) -> tuple[bool, str]:
        if self.runs_locally():
            return True, f"pyverbs with RDMA devices {rdma_devices() or '(rxe created on demand)'}"
        missing = [t for t in ("qemu-system-x86_64", "mmdebstrap", "cpio") if shutil.which(t) is None]
        if missing:
            return False, (f"no pyverbs/RDMA device here and the soft-RoCE guest needs {', '.join(missing)} "
                           "(apt-get install qemu-system-x86 mmdebstrap cpio)")
        return True, "runs in the epfuzz QEMU guest (Debian kernel with rdma_rxe, python3-pyverbs); TCG, slow"

    def run(self, scn: Scenario, proto: Protocol, repeats: int = 1) -> Outcome:
        ok, why = self.availability()
        if not ok:
            raise BackendUnavailable(f"backend verbs cannot run here: {why}")
        repeats = max(1, repeats)
        if self.runs_locally():
            res = local_runner().run(scn, repeats)
        else:
            from epfuzz import vm

            payload = base64.b64encode(scn.to_json(indent=None).encode()).decode()
            rc, lines = vm.run(f"python3 -m epfuzz.backends.verbs {payload} {repeats}", timeout=600, stream=False)
            line = next((x for x in lines if x.startswith("EPFUZZ-VERBS-RESULT ")), None)
            if rc != 0 or line is None:
                raise EpfuzzError("verbs run in the guest failed: " + " | ".join(lines[-6:]))
            res = json.loads(line.split(" ", 1)[1])
        v = None
        if res["violation"]:
            d = res["violation"]
            v = Violation(d["kind"], d["protocol"], d["epoch"], d["channel"], d["what"], bad_bytes=d["bad_bytes"],
                          tokens=d["tokens"])
        return Outcome("verbs", v, runs=res["runs"], hits=res["hits"],
                       summary=f"found in {res['hits']} of {res['runs']} runs on soft-RoCE" +
                       (f": {res['summary']}" if res["summary"] else ""), extra=res)


if __name__ == "__main__":
    import sys

    raise SystemExit(guest_main(sys.argv[1:]))
