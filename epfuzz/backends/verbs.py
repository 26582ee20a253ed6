"""`verbs`: real RDMA through pyverbs (soft-RoCE or an HCA).

Not implemented on this host yet (see issue 5): this module only answers whether
the backend could run and why not, so the CLI and harnesses fail fast with a
reason instead of pretending.
"""

from __future__ import annotations

import importlib.util
import os

from epfuzz.backends.base import Backend, Outcome
from epfuzz.errors import BackendUnavailable
from epfuzz.scenario import Scenario


def rdma_devices() -> list[str]:
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


class VerbsBackend(Backend):
    name = "verbs"
    deterministic = False

    def availability(self) -> tuple[bool, str]:
        has_pyverbs = importlib.util.find_spec("pyverbs") is not None
        devs = rdma_devices()
        why = []
        if not has_pyverbs:
            why.append("pyverbs is not importable")
        if not devs:
            why.append("no RDMA device (/sys/class/infiniband is empty or absent; this kernel has no rdma_rxe)")
        why.append("the verbs runner and its QEMU soft-RoCE guest are not built yet (issue 5)")
        return False, "; ".join(why)

    def run(self, scn: Scenario, repeats: int = 1) -> Outcome:
        raise BackendUnavailable(f"backend verbs cannot run here: {self.availability()[1]}")
