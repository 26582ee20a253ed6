"""Receiver-side caching: what the receiver's reads of NIC-written memory see through its GPU's L2.

Every other layer decides *when* bytes land in receiver memory; this one decides whether the receiver's read
then sees them. ROCm/mori #610 (InterNodeV1 combine on MI355X, wrong aggregates rising with token count and
repetition; InferenceX PR #3119: ROCm 7.2 left VMM allocations requested uncached in the cached pool, VMM_HEAP
wrong, STATIC_HEAP clean) and mori commit 31af7e73 ("NIC RDMA writes go directly to GPU VRAM, bypassing GPU
L2 ... the GPU reads stale L2 cache data"; fix: `hipDeviceMallocUncached`): on an AMD CDNA GPU a line of
local memory the kernel read once stays in L2, and a NIC's PCIe write to that memory neither updates nor
invalidates it (AMDGPUUsage, GFX90A/GFX942 memory model: a line is invalidated by *coherent* requests, and a
PCIe request is one only if configured so). The next read of the line returns what it held.

The mechanism is the smallest that shows this (`RxCache`): the protocol says how its receive heap is mapped
(`Protocol.rx_map`: "coherent", the default and every protocol before this layer; "cached"; "uncached").
Under "cached" each accepted data read (`Consume`) goes through lines of `LINE` bytes: a line not present is
filled from memory at that read (RX-line-fill) and serves every later read until invalidated (RX-stale-line);
writes from outside the receiver (every TLP that is not `local`) land in memory only; the receiver GPU's own
stores (the harness's poison at an epoch's start, its prologue stores) update a line present (RX-own-store);
a read whose `Consume.invalidate` is set drops the lines it covers first (RX-invalidate: `buffer_inv sc1`, or
loads that bypass L2). "uncached" and "coherent" read memory (RX-uncached). Each clause is pinned by a test in
tests/rules/test_rxcache_rules.py.

Limits (docs/model.md): lines are 128 bytes (the CDNA L2 line) and never evicted, so a line read once is
stale at every later read after a NIC write (the real bug is stochastic: eviction refreshes some lines, which
is why #610 shows from ~128 tokens per rank); lines persist across epochs (#610: a device synchronize between
calls did not help; a kernel boundary writes L2 back, it does not invalidate local lines); only the data
region is cached: signal words, CQ and the receiver's own polls read memory (its spins use atomic or
system-scope loads); a read fills every line of the accepted bytes at the accept (a slow read under
`faults.rx_lag` re-reads the lines it filled); the layer does not look at the preset (on an NVIDIA GPU the L2
serves every agent's writes: a protocol for it keeps "coherent"); it does not model the other half of
31af7e73 (the proxy's CPU read of VRAM before the signal: a flush, `Protocol.flush_on_accept`'s kind).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from epfuzz.infra.errors import ProtocolError

LINE = 128  # bytes per L2 line (AMD CDNA 3)
COHERENT, CACHED, UNCACHED = "coherent", "cached", "uncached"
MAPS = (COHERENT, CACHED, UNCACHED)


@dataclass(frozen=True)
class CacheClause:
    name: str
    stale: bool          # whether a read under the clause may return other bytes than memory holds
    source: str
    rule: str


RX_CLAUSES: dict[str, CacheClause] = {c.name: c for c in (
    CacheClause("RX-uncached", False, "mori 31af7e73 (hipDeviceMallocUncached), InferenceX #3119 (STATIC_HEAP "
                "clean); every protocol before this layer (rx_map \"coherent\")",
                "an uncached (or coherent) mapping: every read goes to memory and sees every byte landed"),
    CacheClause("RX-line-fill", False, "AMDGPUUsage, GFX942 memory model (local memory cached in L2, MTYPE RW)",
                "a read of a line not present fills it from memory: the bytes landed at that read"),
    CacheClause("RX-stale-line", True, "ROCm/mori #610, mori 31af7e73 (\"NIC RDMA writes go directly to GPU "
                "VRAM, bypassing GPU L2\"); AMDGPUUsage (only coherent requests invalidate a line)",
                "a NIC's write lands in memory and leaves a present line as it was: a read of the line returns "
                "the bytes of its fill"),
    CacheClause("RX-own-store", False, "AMDGPUUsage, GFX942 memory model (all work-groups of an agent share its "
                "L2: no invalidate needed between them)",
                "the receiver GPU's own stores (poison, prologue) go through its L2: a present line takes them"),
    CacheClause("RX-invalidate", False, "AMDGPUUsage (buffer_inv sc1: invalidate L2 lines); mori 31af7e73's "
                "read path that bypasses L2",
                "the receiver invalidates the lines it reads after seeing the signal: the read refills them "
                "from memory"),
)}


def check_map(rx_map: str, protocol: str) -> str:
    """`rx_map` if it is one of `MAPS`; a one-line error otherwise (a misspelt map must not pass as coherent)."""
    if rx_map not in MAPS:
        raise ProtocolError(f"protocol {protocol!r}: rx_map {rx_map!r} is not one of {', '.join(MAPS)}")
    return rx_map


class RxCache:
    """The receiver's L2 lines over its data region: line index -> (bytes at fill, epoch of the fill)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: dict[int, tuple[bytes, int]] = {}

    def read(self, mem: bytearray, offset: int, length: int, epoch: int,
             invalidate: bool = False) -> tuple[bytes, list[tuple[int, int]]]:
        """The bytes a read of [offset, offset + length) sees, and (line offset, fill epoch) of each line that
        served some of them other than memory holds (RX-stale-line); lines not present are filled."""
        if length <= 0:
            return b"", []
        first, last = offset // LINE, (offset + length - 1) // LINE
        lines = self.lines
        if invalidate:
            for i in range(first, last + 1):
                lines.pop(i, None)
        seen = bytearray()
        stale: list[tuple[int, int]] = []
        for i in range(first, last + 1):
            got = lines.get(i)
            now = bytes(mem[i * LINE:(i + 1) * LINE])
            if got is None:
                got = lines[i] = (now, epoch)  # RX-line-fill
            else:  # only the bytes this read takes from the line count
                lo, hi = max(offset - i * LINE, 0), min(offset + length - i * LINE, LINE)
                if got[0][lo:hi] != now[lo:hi]:
                    stale.append((i * LINE, got[1]))
            seen += got[0]
        start = offset - first * LINE
        return bytes(seen[start:start + length]), stale

    def store(self, mem: bytearray, offset: int, length: int) -> None:
        """The receiver's own stores to [offset, offset + length) are in memory: present lines take them."""
        if length <= 0 or not self.lines:
            return
        for i in range(offset // LINE, (offset + length - 1) // LINE + 1):
            got = self.lines.get(i)
            if got is not None:
                self.lines[i] = (bytes(mem[i * LINE:(i + 1) * LINE]), got[1])

    def state(self) -> tuple[Any, ...]:
        """Hashable: what exploration saves, restores and merges on."""
        return tuple(sorted(self.lines.items()))

    def restore(self, state: tuple[Any, ...]) -> None:
        self.lines = dict(state)
