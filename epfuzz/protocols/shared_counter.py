"""Bug-zoo pattern 5: one cumulative counter shared by in-flight chunks.

`shared_counter` is the bug as shipped (one counter shared by every chunk in flight),
`shared_counter_fixed` the fix as shipped. Both are the dispatch sender
(`epfuzz.protocols.dispatch`) with fields pinned and the receiver defined here; `sources` on each
names the issues and commits they reproduce.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from epfuzz.core.native import mypyc_attr
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout, MemoryView, Pattern
from epfuzz.protocols.dispatch import STRICT_SAME_QP, DispatchProtocol, DispatchReceiver
from epfuzz.protocols.memread import buf_u64, mem_u64

_SIGNAL: Final = ops.SIGNAL  # a constant to compiled code (`ops` is plain Python)


@mypyc_attr(allow_interpreted_subclasses=True)
class SharedCounterReceiver(DispatchReceiver):
    """All channels add their token counts to one word.

    Bad (NVSHMEM #84 shape): channel c treats `counter >= k` as "my first k slots
    landed", although other channels' adds count too. Fixed: wait for the total.
    """

    def __init__(self, scn: Scenario, lay: Layout, wait_total: bool = False) -> None:
        super().__init__(scn, lay)
        self.wait_total = wait_total

    def watch_bytes(self) -> Mapping[str, Sequence[tuple[int, int]]] | None:
        """The shared word: what every channel's observation reads (see `DispatchReceiver.watch_bytes`)."""
        return {ops.SIGNAL: ((0, 8),)} if type(self) is SharedCounterReceiver else None

    def _observe(self, mem: MemoryView, c: int, epoch: int) -> list[tuple[int, int]]:
        # in `poll` over a view with bufs, its signal bytes (`DispatchReceiver._observe`'s read); the layout's counts
        # as `DispatchReceiver` copied them: no generic look-ups per channel and poll (issue 31)
        words = self._words
        value = buf_u64(words, 0) if words is not None and mem is self._view else mem_u64(mem, _SIGNAL, 0)
        n = self.counts[c]
        if self.wait_total:
            total = sum(self.counts)
            return [(1, n)] if value >= total else [(0, 0)]
        return [(int(value >= n), min(value, n))]


PATTERN = Pattern(5, "one cumulative counter shared by in-flight chunks")

BAD = DispatchProtocol(
    "shared_counter", "every chunk adds to ONE counter and a chunk's consumer treats counter >= its count as "
    "'my data landed' (ADD + >=, weak signals)",
    {**STRICT_SAME_QP, "signal.encoding": "counter"}, "finding", ("NVSHMEM #84", "aws-ofi-nccl #1229"),
    shared_word=True, receiver_cls=SharedCounterReceiver,
    pattern=PATTERN)
FIXED = DispatchProtocol(
    "shared_counter_fixed", "one counter, but consumers wait for the total of all chunks",
    {**STRICT_SAME_QP, "signal.encoding": "counter"}, "clean", ("NVSHMEM #84",),
    shared_word=True, receiver_cls=SharedCounterReceiver, receiver_opts={"wait_total": True},
    pattern=PATTERN)

PROTOCOLS = (BAD, FIXED)
