"""`verbs`: the protocols on real RDMA verbs through pyverbs (soft-RoCE rxe, or an HCA).

Where pyverbs and an RDMA device exist (a host with rdma_rxe or mlx5, or the
epfuzz guest), the runner (`verbs_runner.py`) runs a scenario directly on two RDMA
devices (MRs, CQs and QP pairs from `verbs_wiring.py`), with per-QP delay and
throttling made real by tc (`verbs_net.py`).
Elsewhere (this machine: no RDMA in the kernel) `run` boots the epfuzz QEMU guest
(epfuzz/guest/vm.py) and runs the scenario there, and a fuzz campaign moves into the
guest as a whole (`where()` is GUEST). A scenario repeats R times; the verdict is
found in k of R.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from epfuzz.backends.base import Backend, Outcome, Where
from epfuzz.backends.verbs_net import rdma_devices
from epfuzz.encoding import codec
from epfuzz.infra.errors import BackendUnavailable, EpfuzzError, HarnessError, InputError, ProtocolError, Unsupported
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.model.oracle import Violation
from epfuzz.model.rxcache import COHERENT

if TYPE_CHECKING:
    from epfuzz.protocols.base import Protocol

RESULT_MARK = "EPFUZZ-VERBS-RESULT "
ERROR_MARK = "EPFUZZ-VERBS-ERROR "
#: scenario knobs that are settings of the NIC itself: the runner cannot set them (mr_relaxed it can)
DEVICE_KNOBS = frozenset({"knobs.nic_relaxed_ordering", "knobs.atomic_mode", "knobs.hca_o920",
                          "knobs.adaptive_routing", "knobs.ido"})


def guest_main(argv: list[str]) -> int:
    """Inside the guest: run the scenario in file argv[0] argv[1] times and print a JSON result line."""
    from epfuzz.backends.verbs_runner import local_runner
    from epfuzz.protocols import get_protocol, load_plugin

    text = Path(argv[0]).read_text()
    named = json.loads(text).get("protocol", "")
    repeats = int(argv[1])
    try:
        if ":" in named:  # the host wrote this file for a plug-in it was told to load (and sent): load it here too
            load_plugin(named)
        scn = codec.load_json(text)
        res = local_runner().run(scn, get_protocol(scn.protocol), repeats)
    except EpfuzzError as e:  # the host raises it again as itself: one line for the user, no traceback
        print(ERROR_MARK + json.dumps({"kind": type(e).__name__, "message": str(e)}), flush=True)
        return 1
    print(RESULT_MARK + json.dumps(res), flush=True)
    return 0


def _guest_error(line: str) -> EpfuzzError:
    """The guest's error line as the error it was (an inconclusive run stays `Unsupported`, so a
    harness skips it as it does locally); a class this side does not know is a plain EpfuzzError."""
    err = json.loads(line.split(" ", 1)[1])
    kind = {c.__name__: c for c in (Unsupported, InputError, ProtocolError, HarnessError)}.get(err["kind"], EpfuzzError)
    return kind(err["message"])


#: the most bytes an RDMA READ may bring back: the sender MR keeps 4 KiB past its regions, READ results at 512
READ_ROOM = 4096 - 512


def refusal(scn: Scenario, proto: Protocol) -> str:
    """Why verbs cannot run this protocol's ops, or "": a copy-engine copy (`ops.CeCopy`, `ops.CeValue`) is a
    GPU DMA engine's, with no work request to post; a READ's bytes must fit the sender's scratch; the
    sender-side source layer (`epfuzz.model.source`), TMA stores and the stale-frontier quiet are the sim's
    alone, and so is a receive heap mapped through a GPU's cache (`epfuzz.model.rxcache`). Asked on the host,
    before a guest is booted."""
    rx_map = getattr(proto, "rx_map", COHERENT)
    if rx_map != COHERENT:
        return (f"backend verbs: {proto.name}'s receive heap is mapped {rx_map} for a GPU's reads "
                "(epfuzz.model.rxcache); the guest's receiver is a CPU, whose caches the NIC's DMA keeps coherent "
                "(sim only)")
    lay = proto.layout(scn)
    for epoch in range(min(scn.payload.epochs, 2)):  # senders vary per epoch in values, not in op kinds
        for prog in proto.sender(scn, lay, epoch):
            for op in prog:
                if isinstance(op, ops.CeCopy | ops.CeValue):
                    return (f"backend verbs: {proto.name} posts copy-engine copies ({type(op).__name__}); a copy "
                            "engine has no verbs form (the sim models its batches)")
                if isinstance(op, ops.Read) and op.length > READ_ROOM:
                    return f"backend verbs: an RDMA READ of {op.length} bytes; the sender's scratch takes {READ_ROOM}"
                if isinstance(op, ops.SOURCE_OPS):
                    return (f"backend verbs: {type(op).__name__} is a GPU access to the send buffer; soft-RoCE "
                            "reads the source with the CPU, which has no GPU cache to flush (epfuzz.model.source: "
                            "sim only)")
                if isinstance(op, ops.ProxyFence) or isinstance(op, ops.Write) and op.tma:
                    return ("backend verbs: a TMA bulk store and its proxy fence are GPU stores over NVLink (the "
                            "nvlink preset's async proxy), not RDMA operations (sim only)")
                if isinstance(op, ops.Flush) and op.stale:
                    return ("backend verbs: a quiet on a stale frontier (Flush(stale=True)) needs another warp's "
                            "post index; the runner posts from one thread and drains to the live index (sim only)")
    return ""


def _in_guest(scn: Scenario, repeats: int) -> dict[str, Any]:
    """Boot the guest for one scenario (handed in as a file: no size limit) and read its result line. A
    plug-in's source goes with it (the guest has the project alone); one that cannot is refused before the boot."""
    from epfuzz.guest import vm, vm_tree

    files, enter = vm_tree.plugin_shipment(scn.protocol)
    rc, lines = vm.run(f"{enter}python3 -P -m epfuzz.backends.verbs /mnt/cmd/scenario.json {repeats}", timeout=600,
                       stream=False, files={"scenario.json": scn.to_json(indent=None).encode(), **files})
    line = next((x for x in lines if x.startswith(RESULT_MARK)), None)
    if (err := next((x for x in lines if x.startswith(ERROR_MARK)), None)) is not None:
        raise _guest_error(err)
    if rc != 0 or line is None:
        raise EpfuzzError("verbs run in the guest failed: " + " | ".join(lines[-6:]))
    res: dict[str, Any] = json.loads(line.split(" ", 1)[1])
    return res


def _rxe_cannot_show() -> dict[str, str]:
    """What soft-RoCE never exhibits, by rule cell, from the rule tables themselves: rxe places packets
    in memory with the CPU (no PCIe: no table cell of Table 2-40 can fire, nor a second completer's
    path), its Ethernet wire keeps a QP's packets in order (no adaptive routing), there is no GPU (the
    PTX clauses) and no copy engine, the runner's receiver stores come before an epoch's posts, and rxe
    places a QP's requests in order. Cross-QP timing (xQP, cross-QP) it shows: netem delays each QP."""
    from epfuzz.model.cebatch import CE_BATCH
    from epfuzz.model.ordering import MIX_CLAUSES, NVLINK_CLAUSES, RULES
    from epfuzz.model.rdma_read import UNFENCED

    pcie = "soft-RoCE has no PCIe: rxe places packets in memory with the CPU, so no PCIe ordering rule applies"
    out = {clause: pcie for cell in RULES.values() for clause in cell.rule.split("/")}
    out["path"] = pcie
    out.update(dict.fromkeys((*NVLINK_CLAUSES, *MIX_CLAUSES), "soft-RoCE runs no GPU stores"))
    out["AR"] = "soft-RoCE's wire delivers a QP's packets in order: no adaptive routing"
    out[UNFENCED] = "rxe places a QP's requests in order"
    out["no-barrier"] = "the verbs runner makes the receiver's stores before the epoch's posts"
    out[CE_BATCH] = "soft-RoCE has no copy engine"
    return out


class VerbsBackend(Backend):
    name = "verbs"
    deterministic = False

    _local: bool = False   # once true, stays true (devices do not vanish): asked on every run

    def runs_locally(self) -> bool:
        self._local = self._local or importlib.util.find_spec("pyverbs") is not None and (
            bool(rdma_devices()) or os.environ.get("EPFUZZ_IN_GUEST") == "1")
        return self._local

    def signature_fields(self, proto: Protocol) -> tuple[str, ...]:
        """Only fields that change what the runner posts or registers: NIC firmware settings (PCI
        atomic mode, NIC relaxed ordering, o9-20, adaptive routing, IDO) describe the device the
        scenario imagines, which verbs runs as it is, so findings that differ only there are one bug."""
        return tuple(f for f in super().signature_fields(proto) if f not in DEVICE_KNOBS)

    def where(self) -> Where:
        return Where.HERE if self.runs_locally() else Where.GUEST

    def cannot_show(self) -> dict[str, str]:
        return _rxe_cannot_show()

    def availability(self) -> tuple[bool, str]:
        if self.runs_locally():
            return True, f"pyverbs with RDMA devices {rdma_devices() or '(rxe created on demand)'}"
        missing = [t for t in ("qemu-system-x86_64", "mmdebstrap", "cpio") if shutil.which(t) is None]
        if missing:
            return False, (f"no pyverbs/RDMA device here and the soft-RoCE guest needs {', '.join(missing)} "
                           "(apt-get install qemu-system-x86 mmdebstrap cpio)")
        return True, "runs in the epfuzz QEMU guest (Debian kernel with rdma_rxe, python3-pyverbs); TCG, slow"

    def run(self, scn: Scenario, proto: Protocol, repeats: int = 1) -> Outcome:
        why = refusal(scn, proto)
        if why:
            raise Unsupported(why)
        if not self.runs_locally():
            ok, why = self.availability()
            if not ok:
                raise BackendUnavailable(f"backend verbs cannot run here: {why}")
        repeats = max(1, repeats)
        if self.runs_locally():
            from epfuzz.backends.verbs_runner import local_runner

            res = local_runner().run(scn, proto, repeats)
        else:
            res = _in_guest(scn, repeats)
        v = None
        if res["violation"]:
            d = res["violation"]
            v = Violation(d["kind"], d["protocol"], d["epoch"], d["channel"], d["what"], bad_bytes=d["bad_bytes"],
                          bad_chunks=[(int(o), str(c)) for o, c in d["bad_chunks"]], tokens=d["tokens"])
        return Outcome("verbs", v, runs=res["runs"], hits=res["hits"],
                       summary=f"found in {res['hits']} of {res['runs']} runs on soft-RoCE" +
                       (f": {res['summary']}" if res["summary"] else ""), extra=res)


if __name__ == "__main__":
    import sys

    raise SystemExit(guest_main(sys.argv[1:]))
