"""The deep zoo (epfuzz/protocols/deep.py): each bad protocol is found from nothing with a fixed seed
within a bounded budget -- by the schedule sampler over random configurations, or, for the pairs whose
bug sits in a rare configuration corner, by sampled schedules over a scenario in that corner (and by
exhaustive exploration of a small one); each fixed protocol stays clean under the sampler, random
inputs, the same corner scenarios and, where the shape is small enough, exhaustive exploration.
How deep they are for random inputs is measured by bench/depth.py (docs/zoo.md)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import REGISTRY, get_protocol
from epfuzz.protocols.base import Layout
from epfuzz.protocols.deep import DEEP_ZOO, GuardedReceiver
from epfuzz.sim.engine import simulate
from tests.zoo.family import (
    check_corner_fixed_clean,
    check_explored,
    check_fixed_clean,
    check_registered,
    corner_finding,
    sampler_finding,
)

#: (seed, budget): the sampler's executions to the first finding with that seed, measured, times ~2-4
#: deep_notify_qp: 1,552 with seed 4 since a Flush waits for its data's ACK through the port queue (issue 34.3);
#: before, the signal could arrive ahead of flushed data and A2b alone sufficed (989 with seed 1)
SAMPLER = {"deep_ro_signal": (1, 1500), "deep_remainder_flag": (1, 3000), "deep_notify_qp": (4, 4500),
           "deep_reset_race": (1, 3000)}
FIXED_EXECS = 300   # per search (sampler, random) per fixed protocol; the 100k run: docs/benchmarks.md
_RO = {"nic_relaxed_ordering": True, "reorder_window": 64}
#: bad protocol -> (scenario in its configuration corner, seed, budget): sampled schedules over that one
#: scenario reach the bug; the budget is the executions to the first finding with that seed, measured, times ~3
CORNER = {
    "deep_flag_write": ({"knobs": _RO, "chunking": {"tokens_per_wr": 1, "splits_per_token": 2},
                         "payload": {"num_tokens": 2}}, 3, 100),
    "deep_other_qp": ({"knobs": _RO, "signal": {"interval": 4}, "topology": {"num_channels": 1, "num_qps": 2},
                       "payload": {"num_tokens": 6}}, 1, 400),
    "deep_imm_other_qp": ({"knobs": _RO, "topology": {"num_channels": 3, "num_qps": 2}, "payload": {"num_tokens": 6}},
                          3, 200),
    "deep_gdr": ({"knobs": _RO, "signal": {"interval": 4}, "payload": {"num_tokens": 6}}, 1, 300),
}
#: the smallest shapes of the same corners: exhaustive exploration finds the bad form and proves the fixed one
#: clean (every allowed visibility order, the window bounding the states)
SMALL = {
    "deep_flag_write": {"knobs": {**_RO, "reorder_window": 4}, "chunking": {"tokens_per_wr": 1, "splits_per_token": 2},
                        "payload": {"num_tokens": 1}},
    "deep_other_qp": {"knobs": {**_RO, "reorder_window": 4}, "signal": {"interval": 2},
                      "topology": {"num_channels": 1, "num_qps": 2}, "payload": {"num_tokens": 3}},
    "deep_imm_other_qp": {"knobs": {**_RO, "reorder_window": 1}, "topology": {"num_channels": 3, "num_qps": 2},
                          "payload": {"num_tokens": 3}},
    "deep_gdr": {"knobs": {**_RO, "reorder_window": 4}, "signal": {"interval": 2}, "payload": {"num_tokens": 3}},
}


def _corner(name: str, shape: dict[str, Any]) -> Scenario:
    return codec.load_dict({"protocol": name, **shape})


def test_deep_zoo_has_eight_pairs_with_sources_harnesses_and_seeds():
    assert len(DEEP_ZOO) >= 8
    assert {z[2] for z in DEEP_ZOO} == set(SAMPLER) | set(CORNER)
    for _, _, bad, fixed in DEEP_ZOO:
        assert REGISTRY.items[bad].expect == "finding"
        check_registered(bad, fixed)


def test_guarded_receiver_waits_for_the_trailer():
    """The defence: a signal alone does not make a slot readable; the trailer must show this epoch."""
    proto = get_protocol("deep_ro_signal_fixed")
    scn = codec.load_dict({"protocol": "deep_ro_signal_fixed", "payload": {"num_tokens": 2}})
    run = simulate(scn, proto)
    assert run.violation is None and run.polls
    assert isinstance(proto.receiver(scn, run.layout), GuardedReceiver)
    assert all("trailer seen" in a for p in run.polls for a in p.accepted)


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(SAMPLER))
def test_deep_bad_protocol_found_by_the_sampler(bad):
    seed, budget = SAMPLER[bad]
    sampler_finding(bad, seed, budget)


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [z[3] for z in DEEP_ZOO])
def test_deep_fixed_protocol_clean_under_sampler_and_random(fixed):
    check_fixed_clean(fixed, FIXED_EXECS)


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(CORNER))
def test_deep_corner_bug_found_by_sampled_schedules(bad):
    """Inside its corner the bug needs only the reorderings; outside it the bad form behaves as the fixed."""
    shape, seed, budget = CORNER[bad]
    corner_finding(bad, _corner(bad, shape), seed, budget)


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(CORNER))
def test_deep_corner_fixed_clean_where_the_bad_is_found(bad):
    fixed = f"{bad}_fixed"
    check_corner_fixed_clean(fixed, _corner(fixed, CORNER[bad][0]), FIXED_EXECS)


@pytest.mark.slow
@pytest.mark.parametrize("bad", sorted(SMALL))
def test_deep_corner_explored_exhaustively(bad):
    """The same small shape: some visibility order breaks the bad form, none breaks the fixed one."""
    check_explored(bad, f"{bad}_fixed", SMALL[bad])


def _remainder(scn: Scenario, lay: Layout) -> bool:
    iv = scn.signal.interval
    return any(n > iv and n % iv for n in lay.tokens_in_channel)


#: bad protocol -> its corner, as a predicate on a decoded scenario and its layout
IN_CORNER = {
    "deep_flag_write": lambda scn, lay: scn.chunking.tokens_per_wr == 1 and scn.chunking.splits_per_token > 1,
    "deep_other_qp": lambda scn, lay: _remainder(scn, lay) and scn.topology.num_qps > 1,
    "deep_imm_other_qp": lambda scn, lay: scn.topology.num_channels > scn.topology.num_qps > 1,
    "deep_gdr": _remainder,
}


@pytest.mark.parametrize("bad", sorted(IN_CORNER))
def test_deep_bad_differs_from_fixed_only_in_its_corner(bad):
    """Depth comes from the corner: the bad sender posts the fixed sender's ops exactly when outside it
    (deep_gdr: a host-path completion only inside it; outside, the missing flush cannot matter)."""
    proto, fixed = get_protocol(bad), get_protocol(f"{bad}_fixed")
    rng = random.Random(3)
    seen = {True: 0, False: 0}
    for _ in range(400):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 129)), bad)
        lay = proto.layout(scn)
        inside = IN_CORNER[bad](scn, lay)
        seen[inside] += 1
        ops_bad = proto.sender(scn, lay, 0)
        if bad == "deep_gdr":
            assert inside == any(type(op).__name__ == "WriteImm" for prog in ops_bad for op in prog)
        else:
            assert (ops_bad != fixed.sender(scn.replace(protocol=fixed.name), lay, 0)) == inside
    assert seen[True] and seen[False]
