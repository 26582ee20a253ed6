"""Sender-side visibility: one test per `epfuzz.model.source.SOURCE_CLAUSES` entry, on the pure rule
(`nic_read`) and, for each, through the requester (`post_and_send`: the packets it marks stale) and memory
(a stale packet lands as zeros)."""

from __future__ import annotations

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.model.source import CLEAR, FLUSH, FLUSH_RO, SOURCE_CLAUSES, STORE, SrcEvent, nic_read
from epfuzz.sim.packets import PacketKind
from epfuzz.sim.requester import post_and_send

TESTED = {"SRC-assumed", "SRC-flushed", "SRC-unflushed", "SRC-flush-ro", "SRC-overwrite", "SRC-overwrite-later"}
BIG = 16384  # four 4 KiB packets, paced: the last is made well after the posting ends


def _scn() -> Scenario:
    return codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 2, "num_qps": 1}})


def _stale(programs: list[list[ops.Op]], scn: Scenario | None = None) -> list[str]:
    scn = scn or _scn()
    _, pkts = post_and_send(scn, programs, 0, 0, [0] * scn.topology.num_qps)
    return [p.stale for p in sorted(pkts, key=lambda p: p.psn) if p.kind == PacketKind.WRITE]  # post order


def test_every_clause_is_tested_here():
    assert set(SOURCE_CLAUSES) == TESTED
    for c in SOURCE_CLAUSES.values():
        assert c.source and c.rule


def test_src_assumed_no_store_this_epoch_reads_the_payload():
    assert nic_read([], 0, 64, 10) == "SRC-assumed"
    assert nic_read([SrcEvent(0, 0, STORE, 128, 64)], 0, 64, 10) == "SRC-assumed"  # other bytes
    assert not SOURCE_CLAUSES["SRC-assumed"].stale
    assert _stale([[ops.Write(0, ops.DATA, 0, BIG)]]) == [""] * 4


def test_src_flushed_a_strict_flush_between_the_stores_and_the_read():
    ev = [SrcEvent(0, 0, STORE, 0, 64), SrcEvent(5, 0, FLUSH)]
    assert nic_read(ev, 0, 64, 10) == "SRC-flushed"
    assert not SOURCE_CLAUSES["SRC-flushed"].stale
    assert _stale([[ops.SrcStore(0, BIG), ops.SrcFlush(), ops.Write(0, ops.DATA, 0, BIG)]]) == [""] * 4


def test_src_flushed_only_by_the_storing_channel():
    """The GPU-side flush is the storing thread's own (its stores' writeback): another channel's flush
    does not commit them."""
    ev = [SrcEvent(0, 0, STORE, 0, 64), SrcEvent(5, 1, FLUSH)]
    assert nic_read(ev, 0, 64, 10) == "SRC-unflushed"
    progs: list[list[ops.Op]] = [[ops.SrcStore(0, BIG), ops.Spin(100), ops.Write(0, ops.DATA, 0, BIG)],
                                 [ops.SrcFlush()]]
    assert set(_stale(progs)) == {"SRC-unflushed"}


def test_src_unflushed_stores_with_no_flush_may_be_unseen():
    ev = [SrcEvent(0, 0, STORE, 0, 64)]
    assert nic_read(ev, 0, 64, 10) == "SRC-unflushed"
    assert nic_read([SrcEvent(20, 0, STORE, 0, 64), SrcEvent(25, 0, FLUSH)], 0, 64, 10) == "SRC-unflushed"  # read first
    assert nic_read([SrcEvent(0, 0, STORE, 0, 64), SrcEvent(25, 0, FLUSH)], 0, 64, 10) == "SRC-unflushed"  # flush late
    assert SOURCE_CLAUSES["SRC-unflushed"].stale
    assert _stale([[ops.SrcStore(0, BIG), ops.Write(0, ops.DATA, 0, BIG)]]) == ["SRC-unflushed"] * 4


def test_src_flush_ro_a_relaxed_flush_orders_nothing():
    ev = [SrcEvent(0, 0, STORE, 0, 64), SrcEvent(5, 0, FLUSH_RO)]
    assert nic_read(ev, 0, 64, 10) == "SRC-flush-ro"
    assert SOURCE_CLAUSES["SRC-flush-ro"].stale
    assert _stale([[ops.SrcStore(0, BIG), ops.SrcFlush(relaxed=True), ops.Write(0, ops.DATA, 0, BIG)]]) == \
        ["SRC-flush-ro"] * 4


def test_src_overwrite_a_rewrite_before_the_read_may_be_seen():
    assert nic_read([SrcEvent(5, 0, CLEAR, 0, 64)], 0, 64, 10) == "SRC-overwrite"
    flushed = [SrcEvent(0, 0, STORE, 0, 64), SrcEvent(1, 0, FLUSH), SrcEvent(5, 0, CLEAR, 0, 64)]
    assert nic_read(flushed, 0, 64, 10) == "SRC-overwrite"  # flushed stores do not stop a later rewrite
    assert SOURCE_CLAUSES["SRC-overwrite"].stale
    # the clear is reached 20 ns after the post; the first 4 KiB packet is made at ~164 ns: every packet
    assert _stale([[ops.Write(0, ops.DATA, 0, BIG), ops.SrcClear(0, BIG)]]) == ["SRC-overwrite"] * 4


def test_src_overwrite_later_a_rewrite_after_the_read_is_not_carried():
    assert nic_read([SrcEvent(50, 0, CLEAR, 0, 64)], 0, 64, 10) == "SRC-overwrite-later"
    assert not SOURCE_CLAUSES["SRC-overwrite-later"].stale
    # a live Flush waits for the ACK of the last packet, long after the NIC made it
    assert _stale([[ops.Write(0, ops.DATA, 0, BIG), ops.Flush(0), ops.SrcClear(0, BIG)]]) == [""] * 4


def test_a_stale_packet_lands_as_zeros_and_a_shifted_write_reads_its_source():
    """The responder emits a stale packet as TlpAction.STALE, which memory applies as zeros; a Write's source
    bytes are offset + shift."""
    from epfuzz.protocols.gather import GatherReceiver, PathProtocol
    from epfuzz.sim.engine import simulate
    from epfuzz.sim.packets import TlpAction

    def sender(scn, lay, epoch):
        n = lay.tokens_in_channel[0] * lay.token_bytes
        return [[ops.SrcStore(0, n), ops.Write(0, ops.DATA, 0, n), ops.AtomicAdd(0, ops.SIGNAL, 0, 1)]]

    proto = PathProtocol("unflushed", "stores, no flush", {"knobs.mr_relaxed": False}, "finding", (), sender,
                         lambda scn, lay: GatherReceiver(scn, lay, lambda w, c, e: w == 1))
    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 2}})
    run = simulate(scn, proto)
    assert {t.action for t in run.tlps if t.region == ops.DATA} == {TlpAction.STALE}
    assert run.violation is not None and run.violation.kind == "stale-accept"
    ev = [SrcEvent(0, 0, STORE, 64, 64)]
    progs: list[list[ops.Op]] = [[ops.SrcStore(4096, 4096), ops.Write(0, ops.DATA, 0, 4096, shift=4096)]]
    assert nic_read(ev, 0, 64, 10) == "SRC-assumed" and _stale(progs) == ["SRC-unflushed"]


@pytest.mark.parametrize("op", [ops.SrcStore(0, 1 << 40), ops.SrcClear(-16, 16)])
def test_source_ops_outside_the_data_region_are_protocol_errors(op):
    from epfuzz.infra.errors import ProtocolError
    from epfuzz.protocols import get_protocol
    from epfuzz.protocols.opcheck import check_programs

    scn = _scn()
    lay = get_protocol("dispatch_any").layout(scn)
    with pytest.raises(ProtocolError, match="source bytes"):
        check_programs([[op]], lay, "p", 0)


def test_under_nvlink_the_source_layer_orders_nothing():
    """Under `nvlink` the payload is the GPU's own stores into the peer: no NIC reads a send buffer."""
    scn = codec.load_dict({"protocol": "dispatch_any", "preset": "nvlink"})
    assert _stale([[ops.SrcStore(0, BIG), ops.Write(0, ops.DATA, 0, BIG)]], scn) == [""] * 4


def test_the_plugin_references_producer_works_as_written():
    """docs/plugins.md, "The sender's own buffer": the producer as written is clean; without its SrcFlush the
    NIC's reads are SRC-unflushed and the receiver accepts zeros."""
    from pathlib import Path
    from typing import Any

    from epfuzz.sim.engine import simulate

    page = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```python\n")[1:]]
    block = next(b for b in blocks if "SrcFlush()" in b)
    ns: dict[str, Any] = {}
    exec(block, ns)  # noqa: S102 - the repository's own documentation
    proto = ns["PRODUCER"]
    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 3}, "topology": {"num_channels": 2}})
    assert simulate(scn, proto).violation is None
    exec(block.replace("ops.SrcFlush(), ", ""), ns)  # noqa: S102
    run = simulate(scn, ns["PRODUCER"])
    assert run.violation is not None and {p.stale for p in run.packets if p.stale} == {"SRC-unflushed"}
