"""The receiver cache layer (epfuzz.model.rxcache): one test per `RX_CLAUSES` entry, at the rule (`RxCache`) and
through the sim (the receiver step's reads under `Protocol.rx_map`)."""

from __future__ import annotations

import pytest

from epfuzz.encoding import codec
from epfuzz.infra.errors import ProtocolError
from epfuzz.ir import ops
from epfuzz.model.rxcache import LINE, MAPS, RX_CLAUSES, RxCache, check_map
from epfuzz.protocols import get_protocol
from epfuzz.protocols.gather import PathProtocol
from epfuzz.protocols.rxcache import _sender, combine_receiver
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore
from epfuzz.sim.receive import Receiving

TESTED = {"RX-uncached", "RX-line-fill", "RX-stale-line", "RX-own-store", "RX-invalidate"}


def _combine(name: str, rx_map: str, poison: bool = False, invalidate: bool = False) -> PathProtocol:
    """stale_cache's sender and receiver with another mapping, clear or invalidate."""
    bad = get_protocol("stale_cache")
    return PathProtocol(name, "a variant for a rule test", dict(bad.fixed), "clean", (), _sender,
                        combine_receiver(invalidate), rx_map=rx_map, poison=poison)


def _scn(epochs: int, tokens: int = 2, channels: int = 1):
    return codec.load_dict({"protocol": "stale_cache", "payload": {"num_tokens": tokens, "epochs": epochs},
                            "topology": {"num_channels": channels}})


def test_every_clause_is_tested_here():
    assert set(RX_CLAUSES) == TESTED
    for c in RX_CLAUSES.values():
        assert c.source and c.rule
    assert [c.name for c in RX_CLAUSES.values() if c.stale] == ["RX-stale-line"]
    assert get_protocol("stale_cache").rx_map == "cached" and get_protocol("stale_cache_fixed").rx_map == "uncached"


def test_rx_uncached_reads_go_to_memory():
    assert [check_map(m, "p") for m in MAPS] == list(MAPS)
    with pytest.raises(ProtocolError, match="rx_map 'cahced' is not one of coherent, cached, uncached"):
        check_map("cahced", "p")
    for rx_map in ("coherent", "uncached"):
        proto = _combine(f"rx_{rx_map}", rx_map)
        scn = _scn(3, tokens=3, channels=2)
        assert Receiving(scn, proto, proto.layout(scn), []).cache is None  # no lines at all
        assert simulate(scn, proto).violation is None
        assert explore(scn, proto, max_states=50_000).violation is None
    assert get_protocol("dispatch_any").rx_map == "coherent"  # every protocol before the layer


def test_rx_line_fill_a_read_fills_whole_lines_from_memory():
    mem = bytearray(range(256)) * 2  # 512 bytes, four lines
    cache = RxCache()
    seen, stale = cache.read(mem, 8, 16, epoch=0)
    assert seen == bytes(mem[8:24]) and stale == [] and set(cache.lines) == {0}
    assert cache.lines[0] == (bytes(mem[:LINE]), 0)  # the whole line, bytes outside the read included
    seen, stale = cache.read(mem, LINE - 8, 16, epoch=1)  # straddles lines 0 and 1: line 1 is filled now
    assert seen == bytes(mem[LINE - 8:LINE + 8]) and stale == [] and cache.lines[1][1] == 1
    # through the sim: one epoch reads every line once, after its data landed (a strict signal): clean
    assert simulate(_scn(1, tokens=3, channels=2), get_protocol("stale_cache")).violation is None


def test_rx_stale_line_a_nic_write_leaves_a_present_line_as_it_was():
    mem = bytearray(2 * LINE)
    cache = RxCache()
    cache.read(mem, 0, 32, epoch=0)
    mem[16:32] = b"\x01" * 16  # a NIC write lands in memory (bytes outside the first read: same line)
    seen, stale = cache.read(mem, 16, 16, epoch=1)
    assert seen == bytes(16) and stale == [(0, 0)]  # the line as filled in epoch 0
    assert cache.read(mem, 0, 16, epoch=1) == (bytes(16), [])  # the bytes it serves here are memory's too
    # through the sim: the second call's reduction reads the first call's partials
    run = simulate(_scn(2), get_protocol("stale_cache"))
    v = run.violation
    assert v is not None and v.kind == "stale-accept" and v.epoch == 1
    assert {cls for _, cls in v.bad_chunks} == {"stale"}  # an older epoch's payload
    assert v.extra["rx_cache"] == "RX-stale-line" and v.extra["rx_lines"] == [[0, 0]]
    assert run.culprit_rules() == {"RX-stale-line"} and not run.tlp_inversions


def test_rx_own_store_the_receivers_stores_update_a_present_line():
    mem = bytearray(2 * LINE)
    cache = RxCache()
    cache.store(mem, 0, LINE)
    assert cache.lines == {}  # no line is made by a store
    cache.read(mem, 0, 16, epoch=0)
    mem[0:LINE * 2] = b"\x07" * (2 * LINE)  # the receiver GPU clears (poisons) the buffer
    cache.store(mem, 0, 2 * LINE)
    assert cache.lines == {0: (b"\x07" * LINE, 0)}
    # through the sim: with the harness's poison (the GPU's own stores) the stale lines hold this epoch's
    # poison, not the last epoch's payload
    proto = _combine("rx_cached_poison", "cached", poison=True)
    v = simulate(_scn(2), proto).violation
    assert v is not None and {cls for _, cls in v.bad_chunks} == {"poisoned"} and v.extra["rx_cache"]


def test_rx_invalidate_a_read_after_an_invalidate_refills_from_memory():
    mem = bytearray(2 * LINE)
    cache = RxCache()
    cache.read(mem, 0, 2 * LINE, epoch=0)
    mem[:] = b"\x02" * (2 * LINE)
    seen, stale = cache.read(mem, 0, 16, epoch=1, invalidate=True)
    assert seen == b"\x02" * 16 and stale == [] and cache.lines[0] == (b"\x02" * LINE, 1)
    assert cache.read(mem, LINE, 16, epoch=1)[1] == [(LINE, 0)]  # only the lines it covered were dropped
    # through the sim: the combine that invalidates before its reduction is clean on a cached heap
    proto = _combine("rx_cached_invalidate", "cached", invalidate=True)
    scn = _scn(3, tokens=3, channels=2)
    assert simulate(scn, proto).violation is None
    assert explore(scn, proto, max_states=50_000).violation is None
    (c,) = proto.receiver(_scn(1), proto.layout(_scn(1))).poll(_FullSignals(), 0)
    assert c.invalidate and c.region == ops.DATA


class _FullSignals:
    """A memory view whose every signal word is 1."""

    def u64(self, region: str, offset: int) -> int:
        return 1

    def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
        return (0, 0, 0, 0)

    def read(self, region: str, offset: int, length: int) -> bytes:
        return bytes(length)


def test_the_plugin_references_combine_works_as_written():
    """docs/plugins.md, "The receiver's cache": the combine as written is clean over three epochs; with its
    receiver's invalidate dropped it reads the first epoch's lines in the second (RX-stale-line)."""
    from pathlib import Path
    from typing import Any

    page = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```python\n")[1:]]
    block = next(b for b in blocks if "invalidate=True" in b)
    ns: dict[str, Any] = {}
    exec(block, ns)  # noqa: S102 - the repository's own documentation
    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 3, "epochs": 3},
                           "topology": {"num_channels": 2}})
    assert simulate(scn, ns["COMBINE"]).violation is None
    exec(block.replace("replace(c, invalidate=True)", "c"), ns)  # noqa: S102
    v = simulate(scn, ns["COMBINE"]).violation
    assert v is not None and v.epoch == 1 and v.extra["rx_cache"] == "RX-stale-line"
