"""`cuda`: write-then-signal on real GPUs (NVLink P2P, host-mapped memory) through torch.

Only the availability check exists so far (issue 6): without torch and a CUDA
device it says why, and nothing pretends to run.
"""

from __future__ import annotations

import importlib.util

from epfuzz.backends.base import Backend, Outcome
from epfuzz.errors import BackendUnavailable
from epfuzz.scenario import Scenario


class CudaBackend(Backend):
    name = "cuda"
    deterministic = False

    def availability(self) -> tuple[bool, str]:
        if importlib.util.find_spec("torch") is None:
            return False, "torch is not installed (pip install 'epfuzz[cuda]')"
        import torch

        if not torch.cuda.is_available():
            return False, "torch sees no CUDA device"
        return False, "the GPU kernels of this backend are not built yet (issue 6)"

    def run(self, scn: Scenario, repeats: int = 1) -> Outcome:
        raise BackendUnavailable(f"backend cuda cannot run here: {self.availability()[1]}")
