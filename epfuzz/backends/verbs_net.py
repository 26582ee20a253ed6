"""The verbs backend's network: two rxe devices on a veth pair, and tc shaping per QP.

QPs on one rxe device never touch a netdev, so a delay or a throttle there changes
nothing; two rxe devices on a veth pair, routed so RoCE traffic really crosses the
netdevs, make tc's netem and rate limits real (recipe in docs/backends.md, "The verbs backend
and its guest"). A per-QP delay is a prio band whose u32 filter matches the BTH
destination QPN.
"""

from __future__ import annotations

import atexit
import os
import re
import select
import subprocess
import time
from pathlib import Path

from epfuzz.infra.errors import HarnessError

IP = {"veth0": "198.18.0.1", "veth1": "198.18.0.2"}  # benchmark range; it never leaves the guest
#: the rate a throttle divisor of 1 stands for on the guest's veth
LINK_MBIT = 1000


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
    """Two rxe devices on a veth pair, routed so RoCE traffic really crosses the netdevs; idempotent."""
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


#: the shaping each netdev has now (set by this process): a run whose shaping is already in place
#: pays nothing, any other one batch to the tc session below; runs leave their shaping for the
#: next (cleared at exit)
_shaped: dict[str, tuple[tuple[tuple[int, tuple[int, int]], ...], int]] = {}


class TcSession:
    """One `tc -force -batch -` process for the life of this process, fed through a pipe.

    Starting tc costs 0.1-0.4 s in the TCG guest (fork, exec, dynamic linking), most of a
    short run. A batch ends with a marker, a `show` with a word tc cannot parse, named after
    the batch: tc reports each failure on stderr as it goes, so its report of the marker, in the
    same stream, means every command before it is done, and the "Command failed -:N" lines
    before it (N counts lines over the session's life) say which of them failed. (Not a `show`
    of a missing device: the kernel then runs modprobe for a driver of that name, 0.5 s under
    TCG.) stdout is not read (a `show` in a batch prints there)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines = 0
        self.batches = 0
        self.errors = ""     # the last batch's failure reports

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(["tc", "-force", "-batch", "-"], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.lines = 0
            os.set_blocking(self.proc.stderr.fileno(), False)  # type: ignore[union-attr]
        return self.proc

    def run(self, cmds: list[str], timeout: float = 60.0) -> list[int]:
        """Run `cmds`; returns the (1-based) positions in `cmds` of those that failed."""
        p = self._start()
        assert p.stdin and p.stderr
        first = self.lines + 1
        self.batches += 1
        marker = f"epfz{self.batches % 100_000}"
        self.lines += len(cmds) + 1
        end = f"Command failed -:{self.lines}\n".encode()
        try:
            p.stdin.write(("\n".join([*cmds, f"qdisc show {marker}"]) + "\n").encode())
            p.stdin.flush()
        except BrokenPipeError:
            self.close()
            raise HarnessError("tc exited before a batch") from None
        err = b""
        deadline = time.monotonic() + timeout
        while not err.endswith(end):
            left = deadline - time.monotonic()
            if left <= 0 or p.poll() is not None:
                self.close()
                raise HarnessError(f"tc stopped answering ({'exited' if left > 0 else 'timed out'}): "
                                   f"{err.decode(errors='replace').strip()}")
            if select.select([p.stderr], [], [], left)[0]:
                err += os.read(p.stderr.fileno(), 65536)
        text = err[:-len(end)].decode(errors="replace")
        self.errors = text.replace(f'What is "{marker}"? Try "tc qdisc help".', "").strip()
        return [int(m) - first + 1 for m in re.findall(r"Command failed -:(\d+)", text)]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


_tc = TcSession()


def _clear_at_exit() -> None:
    _tc.close()
    for dev in list(_shaped):
        subprocess.run(["tc", "qdisc", "del", "dev", dev, "root"], capture_output=True)


atexit.register(_clear_at_exit)


def shape(dev: str, per_qp: dict[int, tuple[int, int]], port_div: int) -> None:
    """tc on the sender's netdev: one prio band per shaped QP (netem delay and rate on the packets
    whose BTH destination QPN matches, u32 at offset 32 of the IP packet), everything else through
    the last band (netem rate when the port is throttled). A shaped QP's band is not also under the
    port's rate (a simplification). `per_qp`: destination QPN -> (delay ns, rate divisor)."""
    shaped = sorted(per_qp.items())[:15]
    want = (tuple(shaped), max(port_div, 1))
    if _shaped.get(dev) == want:
        return
    _shaped.pop(dev, None)  # unknown until every command below has succeeded
    cmds = [f"qdisc del dev {dev} root"]  # fails when nothing is there: the only failure allowed
    if shaped or port_div > 1:
        n = len(shaped) + 1
        cmds.append(f"qdisc add dev {dev} root handle 1: prio bands {max(n, 2)} priomap " + " ".join([str(n - 1)] * 16))
        default = f"netem rate {LINK_MBIT // port_div}mbit" if port_div > 1 else "pfifo"
        cmds.append(f"qdisc add dev {dev} parent 1:{n} handle {n}0: {default}")
        for band, (qpn, (delay_ns, div)) in enumerate(shaped, start=1):
            rate = f" rate {LINK_MBIT // div}mbit" if div > 1 else ""
            cmds.append(f"qdisc add dev {dev} parent 1:{band} handle {band}0: netem delay "
                        f"{max(1, delay_ns // 1000)}us{rate}")
            cmds.append(f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match u32 {qpn} 0x00ffffff at 32 "
                        f"flowid 1:{band}")
    if any(n > 1 for n in _tc.run(cmds)):
        raise HarnessError(f"tc shaping failed on {dev}: {_tc.errors}")
    _shaped[dev] = want
