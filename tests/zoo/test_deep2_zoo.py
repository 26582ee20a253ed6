"""The second deep set (epfuzz/protocols/deep2.py): defences other than the slot trailer check.

Each bad protocol is found from nothing with a fixed seed within a bounded budget of executions -- by the
schedule sampler over random configurations, or, where the corner is rare, by sampled schedules over a
scenario in that corner (and by exhaustive exploration of a small one); each fixed protocol stays clean
under the sampler, random inputs, the same corner scenarios and, where the shape is small enough,
exhaustive exploration. The sampler and `explore` are the engine-independent parts the search rewrite
(issue 27) keeps, so these budgets mean the same before and after it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import REGISTRY, get_protocol
from epfuzz.protocols.deep2 import DEEP2_ZOO, Deep2Dispatch, StampReceiver
from epfuzz.protocols.dispatch import pack2
from epfuzz.search.sampler import SamplerSearch, sample_schedule
from epfuzz.sim.engine import simulate
from epfuzz.triage.explain import explain
from tests.zoo.family import (
    check_corner_fixed_clean,
    check_explored,
    check_fixed_clean,
    check_registered,
    corner_finding,
    sampler_finding,
)

#: (seed, budget): the sampler's executions to the first finding with that seed, measured (December 2026),
#: times ~3-5: deep2_head_stamp 53 (seed 2), deep2_head_trailer 118 (seed 2), deep2_notify 128 (seed 4),
#: deep2_packed 12 (seed 4), deep2_spin_qp 19 (seed 1), deep2_meta_qp 47 (seed 3), deep2_cqe_packets 267 (seed 2)
SAMPLER = {"deep2_head_stamp": (2, 250), "deep2_head_trailer": (2, 500), "deep2_notify": (4, 500),
           "deep2_packed": (4, 60), "deep2_spin_qp": (1, 100), "deep2_meta_qp": (3, 200),
           "deep2_cqe_packets": (2, 1000)}
FIXED_EXECS = 300   # per search (sampler, random) per fixed protocol; the 100k run: bench/fixed_budget.md
_RO = {"nic_relaxed_ordering": True, "reorder_window": 64}
#: bad protocol -> (scenario in its configuration corner, seed, budget): sampled schedules over that one
#: scenario reach the bug (first finding with that seed, measured, times ~3-10); arrival order is safe
CORNER = {
    "deep2_mid_stamp": ({"knobs": _RO, "chunking": {"splits_per_token": 2}, "payload": {"num_tokens": 1},
                         "topology": {"num_channels": 1, "num_qps": 2}}, 1, 30),
    "deep2_notify": ({"knobs": _RO, "payload": {"epochs": 2, "num_tokens": 1},
                      "topology": {"num_channels": 1, "num_qps": 2, "channel_qp": [1]}}, 1, 150),
    "deep2_seq_stride": ({"knobs": _RO, "chunking": {"tokens_per_wr": 1, "splits_per_token": 2},
                          "payload": {"num_tokens": 2}}, 1, 50),
}
#: the rule each bad form's finding needs, which `explain` names among its overtakes (A2b: a relaxed-ordered
#: write passes an earlier one; xQP: no order across QPs; path: a completion on another PCIe path)
RULE = {"deep2_seq_stride": "A2b", "deep2_meta_qp": "xQP", "deep2_cqe_packets": "path"}
#: the smallest shapes of the corners: exhaustive exploration finds the bad form and proves the fixed one
#: clean (every allowed visibility order, the window bounding the states)
SMALL = {
    "deep2_head_stamp": {"knobs": {**_RO, "reorder_window": 2}, "payload": {"num_tokens": 7},
                         "topology": {"num_channels": 1, "num_qps": 1}},
    "deep2_mid_stamp": {"knobs": {**_RO, "reorder_window": 2}, "chunking": {"splits_per_token": 2},
                        "payload": {"num_tokens": 1}, "topology": {"num_channels": 1, "num_qps": 2}},
    "deep2_head_trailer": {"knobs": {**_RO, "reorder_window": 4}, "chunking": {"tokens_per_wr": 2},
                           "payload": {"num_tokens": 2}, "topology": {"num_channels": 1, "num_qps": 1}},
    "deep2_notify": {"knobs": {**_RO, "reorder_window": 1}, "payload": {"epochs": 2, "num_tokens": 1},
                     "topology": {"num_channels": 1, "num_qps": 2, "channel_qp": [1]}},
    "deep2_spin_qp": {"knobs": {**_RO, "reorder_window": 1}, "payload": {"num_tokens": 3},
                      "topology": {"num_channels": 3, "num_qps": 2, "channel_qp": [0, 0, 0]}},
    "deep2_seq_stride": {"knobs": {**_RO, "reorder_window": 4}, "chunking": {"tokens_per_wr": 1, "splits_per_token": 2},
                         "payload": {"num_tokens": 1}},
    "deep2_meta_qp": {"knobs": {**_RO, "reorder_window": 1}, "signal": {"interval": 2},
                      "topology": {"num_channels": 1, "num_qps": 2}, "payload": {"num_tokens": 3}},
    "deep2_cqe_packets": {"knobs": {**_RO, "reorder_window": 4}, "signal": {"interval": 2},
                          "payload": {"num_tokens": 3}},
}


def _corner(name: str, shape: dict[str, Any]) -> Scenario:
    return codec.load_dict({"protocol": name, **shape})


def test_deep2_zoo_has_six_pairs_with_sources_harnesses_and_seeds():
    assert len(DEEP2_ZOO) >= 6
    assert {z[2] for z in DEEP2_ZOO} == set(SAMPLER) | set(CORNER)
    for _, _, bad, fixed in DEEP2_ZOO:
        assert REGISTRY.items[bad].expect == "finding"
        check_registered(bad, fixed)
        assert REGISTRY.items[bad].doc and REGISTRY.items[fixed].doc, bad



def test_no_pair_relies_on_the_trailer_check_alone():
    """The point of the set: a receiver that reads a stamp reads it somewhere else too, or reads none."""
    for _, _, bad, fixed in DEEP2_ZOO:
        for name in (bad, fixed):
            proto = get_protocol(name)
            assert isinstance(proto, Deep2Dispatch)
            assert proto.receiver_opts["check"] != "trailer", name


@pytest.mark.parametrize("check, chunk", [("head", 0), ("middle", 450), ("both", 899), ("stride", 127),
                                          ("packets", 255), ("packets", 768)])
def test_a_stamp_receiver_waits_for_its_stamp(check, chunk):
    """The defence itself: with the signal seen, a slot whose stamp chunk is still poison is not read;
    once the stamp lands it is (the rest of the slot is there too)."""
    scn = codec.load_dict({"protocol": "deep2_head_trailer_fixed", "payload": {"num_tokens": 1}})
    proto = get_protocol("deep2_head_trailer_fixed")
    lay = proto.layout(scn)
    rx = StampReceiver(scn, lay, check=check)
    rx.start_epoch(0)
    run = simulate(scn, proto)
    assert run.violation is None

    class Mem:
        def __init__(self, hide: int) -> None:
            self.hide = hide

        def u64(self, region: str, offset: int) -> int:
            return (1 << 32) | 1 if region == ops.SIGNAL else 0  # pack2(finish, tail = 1)

        def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
            if offset // 16 == self.hide:
                return (0xC0DE0000, 0, 0, 0)
            return (0, 0, 0, 0)

        def read(self, region: str, offset: int, length: int) -> bytes:
            return bytes(length)

    assert rx.poll(Mem(chunk), 0) == []
    assert [c.length for c in rx.poll(Mem(-1), 0)] == [lay.token_bytes]


def test_the_sampled_checks_read_their_chunks_only():
    """The stride and packet samples of a DeepEP slot (900 chunks of 16 bytes): the last chunk of every KiB
    (the slot's last 64 bytes unchecked), and the first and last chunk of every 4 KiB packet."""
    scn = codec.load_dict({"protocol": "deep2_seq_stride_fixed", "payload": {"num_tokens": 1}})
    lay = get_protocol("deep2_seq_stride_fixed").layout(scn)
    assert StampReceiver(scn, lay, check="stride")._chunks() == tuple(range(63, 896, 64))
    assert StampReceiver(scn, lay, check="packets")._chunks() == (0, 255, 256, 511, 512, 767, 768, 899)


def test_a_metadata_entry_counts_only_when_it_names_this_call():
    """deep2_meta_qp's defence: last call's entry (same count, older stamp) reads as no count at all."""
    scn = codec.load_dict({"protocol": "deep2_meta_qp_fixed", "payload": {"num_tokens": 1},
                           "topology": {"num_channels": 1}})
    lay = get_protocol("deep2_meta_qp_fixed").layout(scn)
    rx = StampReceiver(scn, lay, check="none", meta=True)
    rx.start_epoch(1)

    class Mem:
        def __init__(self, entry: int) -> None:
            self.entry = entry

        def u64(self, region: str, offset: int) -> int:
            return self.entry if region == ops.RECV else 0

        def u32x4(self, region: str, offset: int) -> tuple[int, int, int, int]:
            return (1, 0, 0, 0)

        def read(self, region: str, offset: int, length: int) -> bytes:
            return bytes(length)

    assert rx.poll(Mem(pack2(1, 1)), 1) == []  # the entry of call 0
    assert [c.length for c in rx.poll(Mem(pack2(2, 1)), 1)] == [lay.token_bytes]
    assert rx.done()


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(RULE))
def test_explain_names_the_rule_each_new_bug_needs(bad):
    """The finding's explanation names the ordering rule that broke the defence (the run needs it too)."""
    if bad in CORNER:
        shape, seed, budget = CORNER[bad]
        proto, base, rng = get_protocol(bad), _corner(bad, shape), random.Random(seed)
        draws = (base.replace(schedule=sample_schedule(base, proto, rng)) for _ in range(budget))
    else:
        seed, budget = SAMPLER[bad]
        proto = get_protocol(bad)
        search = SamplerSearch(bad, proto, seed)
        draws = (search.next_scenario() for _ in range(budget))
    for scn in draws:
        run = simulate(scn, proto)
        if run.violation is not None:
            assert RULE[bad] in run.culprit_rules(), run.culprit_rules()
            assert any(line.startswith(RULE[bad] + ":") for line in explain(scn, proto).overtakes)
            return
    pytest.fail(f"{bad}: no finding in {budget} draws (seed {seed})")


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(SAMPLER))
def test_deep2_bad_protocol_found_by_the_sampler(bad):
    seed, budget = SAMPLER[bad]
    sampler_finding(bad, seed, budget)


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [z[3] for z in DEEP2_ZOO])
def test_deep2_fixed_protocol_clean_under_sampler_and_random(fixed):
    check_fixed_clean(fixed, FIXED_EXECS)


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(CORNER))
def test_deep2_corner_bug_found_by_sampled_schedules(bad):
    """Inside its corner the bug needs only the reordering; in arrival order the corner is safe."""
    shape, seed, budget = CORNER[bad]
    corner_finding(bad, _corner(bad, shape), seed, budget)


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(CORNER))
def test_deep2_corner_fixed_clean_where_the_bad_is_found(bad):
    fixed = f"{bad}_fixed"
    check_corner_fixed_clean(fixed, _corner(fixed, CORNER[bad][0]), FIXED_EXECS)


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(SMALL))
def test_deep2_corner_explored_exhaustively(bad):
    """The same small shape: some visibility order breaks the bad form, none breaks the fixed one."""
    check_explored(bad, f"{bad}_fixed", SMALL[bad])



def test_spin_qp_holds_while_the_spin_covers_the_shared_qp():
    """The timing assumption is the defence: three channels on one throttled QP, their signals on the
    other after the spin; at a 1/8 link the data of a batch lands within the spin, at 1/16 it does not."""
    shape = {"knobs": _RO, "signal": {"interval": 8}, "payload": {"num_tokens": 21},
             "topology": {"num_channels": 3, "num_qps": 2, "channel_qp": [0, 0, 0]}}
    for name in ("deep2_spin_qp", "deep2_spin_qp_fixed"):
        proto = get_protocol(name)
        slow = simulate(_corner(name, {**shape, "faults": {"qp_rate_div": [16, 1]}}), proto)
        fast = simulate(_corner(name, {**shape, "faults": {"qp_rate_div": [8, 1]}}), proto)
        assert fast.violation is None, name
        assert (slow.violation is not None) == (name == "deep2_spin_qp"), name


def test_packed_lanes_overflow_only_past_sixteen_tokens():
    """deep2_packed's corner is a count, not a schedule: the next channel reads a token too many once a
    channel sends 16; below that, the 4-bit lanes read as the 8-bit ones."""
    for tokens, stale in ((30, False), (40, True)):
        shape = {"knobs": _RO, "payload": {"num_tokens": tokens}, "topology": {"num_channels": 2}}
        assert (simulate(_corner("deep2_packed", shape), get_protocol("deep2_packed")).violation is not None) == stale
        assert simulate(_corner("deep2_packed_fixed", shape), get_protocol("deep2_packed_fixed")).violation is None


def _remainder(scn: Scenario, lay: Any) -> bool:
    iv = scn.signal.interval
    return any(n > iv and n % iv for n in lay.tokens_in_channel)


def _split(scn: Scenario) -> bool:
    return scn.chunking.tokens_per_wr == 1 and scn.chunking.splits_per_token > 1


#: bad protocol -> its corner, as a predicate on a decoded scenario and its layout (deep2_packed: its lanes
#: differ everywhere; its corner is a count, tested above)
IN_CORNER = {
    "deep2_head_stamp": _remainder,
    "deep2_mid_stamp": lambda scn, lay: _split(scn) and scn.topology.num_qps > 1,
    "deep2_head_trailer": lambda scn, lay: scn.chunking.tokens_per_wr > 1 and max(lay.tokens_in_channel) > 1,
    "deep2_notify": lambda scn, lay: any(scn.qp_of_channel(c) != 0 for c in range(lay.num_channels)),
    "deep2_spin_qp": lambda scn, lay: any(get_protocol("deep2_spin_qp").shared_qp(scn, c)  # type: ignore[attr-defined]
                                          for c in range(lay.num_channels)),
    "deep2_seq_stride": lambda scn, lay: _split(scn),
    "deep2_meta_qp": lambda scn, lay: _remainder(scn, lay) and scn.topology.num_qps > 1,
    "deep2_cqe_packets": _remainder,
}


@pytest.mark.parametrize("bad", sorted(IN_CORNER))
def test_deep2_bad_differs_from_fixed_only_in_its_corner(bad):
    """Depth comes from the corner: the bad sender posts the fixed sender's ops exactly when outside it
    (deep2_cqe_packets: the senders are one; a host-path completion only inside it, and outside it the
    fixed form's flush cannot matter)."""
    proto, fixed = get_protocol(bad), get_protocol(f"{bad}_fixed")
    rng = random.Random(3)
    seen = {True: 0, False: 0}
    for _ in range(400):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 129)), bad)
        lay = proto.layout(scn)
        inside = IN_CORNER[bad](scn, lay)
        seen[inside] += 1
        if bad == "deep2_cqe_packets":
            assert inside == any(isinstance(op, ops.WriteImm) for prog in proto.sender(scn, lay, 1) for op in prog)
        else:
            assert (proto.sender(scn, lay, 1) != fixed.sender(scn.replace(protocol=fixed.name), lay, 1)) == inside
    assert seen[True] and seen[False]
