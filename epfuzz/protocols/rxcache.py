"""Issue 30's receiver-side pair: a combine that reads NIC-written partials from a cached heap (field note N6).

`stale_cache` (ROCm/mori #610, InferenceX PR #3119, mori 31af7e73): mori's InterNodeV1 combine. Each remote
rank puts its partials (the tokens) into the receiver's combine buffer with RDMA WRITEs and signals with a
fetch-and-add on the same QP into a strict MR, so no PCIe or IB rule lets the signal pass the data: every
byte has landed when the receiver reads. The receive heap, though, was allocated cached (ROCm 7.2 put VMM
allocations requested uncached in the cached pool): the combine of the previous call read the same buffer
and left its lines in L2; this call's RDMA WRITEs land in VRAM and leave those lines as they were
(`epfuzz.model.rxcache`, RX-stale-line), so the reduction reads the previous call's partials. The buffer is
not cleared between calls (`poison=False`, as in mori; a clear by the receiver GPU's own stores would put
the clear's bytes in the lines instead, RX-own-store). One call (one epoch) is clean: a line is stale only
after an earlier read.

`stale_cache_fixed`: the heap allocated uncached (`hipDeviceMallocUncached`, 31af7e73; #3119's STATIC_HEAP):
every read goes to memory (RX-uncached). Invalidating the lines before the read (`Consume(invalidate=True)`,
RX-invalidate) fixes it too (tests/zoo/test_rxcache_zoo.py).
"""

from __future__ import annotations

from dataclasses import replace

from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Consume, Layout, MemoryView, Receiver
from epfuzz.protocols.deepep_paths import ll_combine_sender
from epfuzz.protocols.gather import GatherReceiver, PathProtocol, ReceiverFactory

_STRICT = {"knobs.mr_relaxed": False, "signal.other_qp": False, "signal.kind": "faa", "signal.fence": False}
_N6 = ("ROCm/mori #610", "mori 31af7e73", "InferenceX #3119")


#: each source (channel) puts its partials, then adds 1 to its signal word on the same QP: the put-then-add
#: of DeepEP's V1 low-latency combine, which mori's InterNodeV1 combine shares
_sender = ll_combine_sender


class InvalidatingReceiver(GatherReceiver):
    """The combine's receiver that invalidates the lines of what it reads once every source signalled."""

    def poll(self, mem: MemoryView, epoch: int) -> list[Consume]:
        return [replace(c, invalidate=True) for c in super().poll(mem, epoch)]


def combine_receiver(invalidate: bool = False) -> ReceiverFactory:
    """The combine's receiver: it reduces once every source's signal word is 1."""
    kind = InvalidatingReceiver if invalidate else GatherReceiver

    def make(scn: Scenario, lay: Layout) -> Receiver:
        return kind(scn, lay, lambda word, c, epoch: word == 1, what="every source's signal is 1")
    return make


STALE_CACHE = PathProtocol(
    "stale_cache", "mori InterNodeV1 combine before 31af7e73: cross-node partials by RDMA WRITE, each source's "
    "signal a fetch-and-add on the data's QP (strict MR: the data has landed), the combine buffer allocated "
    "cached on a GPU whose L2 the NIC's writes bypass: the previous call's read left lines that this call's "
    "reduction reads instead of the new partials (RX-stale-line)",
    dict(_STRICT), "finding", _N6, _sender, combine_receiver(), rx_map="cached", poison=False)
STALE_CACHE_FIXED = PathProtocol(
    "stale_cache_fixed", "the combine buffer allocated uncached (hipDeviceMallocUncached, 31af7e73; #3119's "
    "STATIC_HEAP): every read goes to memory (RX-uncached)", dict(_STRICT), "clean", _N6[1:], _sender,
    combine_receiver(), rx_map="uncached", poison=False)

PROTOCOLS = (STALE_CACHE, STALE_CACHE_FIXED)
#: (title, bad, fixed) per pair (tests/zoo/test_rxcache_zoo.py, bench/fixed_budget.py)
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("a combine reads NIC-written partials through stale L2 lines (cached heap)", STALE_CACHE.name,
     STALE_CACHE_FIXED.name),
)
