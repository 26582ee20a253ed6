"""The PCT-style schedule sampler: events, not units, and a mutator move that keeps the configuration."""

from __future__ import annotations

import random

from epfuzz.continuous.seeds import SEED_661
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.search.sampler import SamplerSearch, mutate_schedule, sample_schedule
from epfuzz.sim.engine import simulate


def test_schedule_has_one_to_three_change_points_that_reorder():
    scn = codec.load_dict({**SEED_661, "schedule": []})
    proto = get_protocol(scn.protocol)
    rng = random.Random(1)
    reordered = 0
    for _ in range(50):
        sched = sample_schedule(scn, proto, rng)
        assert 1 <= len(sched) <= 3
        run = simulate(scn.replace(schedule=sched), proto)
        reordered += bool(run.tlp_inversions)
    assert reordered >= 25   # RO data and an RO atomic: most change points move something


def test_sampler_picks_the_single_signal_tlp_often():
    """One atomic among 57 data TLPs: uniform units would pick it ~1/58 of the time."""
    scn = codec.load_dict({**SEED_661, "schedule": [], "chunking": {"max_payload": 128}})
    proto = get_protocol(scn.protocol)
    rng = random.Random(2)
    hits = sum(simulate(scn.replace(schedule=sample_schedule(scn, proto, rng, depth=1)), proto).violation is not None
               for _ in range(200))
    assert hits >= 20, hits


def test_mutator_move_keeps_the_configuration():
    proto = get_protocol("deep_gdr")
    rng = random.Random(3)
    data = codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": 3},
                               "topology": {"num_channels": 2}})
    data = codec.encode(data)
    before = codec.decode(data, "deep_gdr")
    after = codec.decode(mutate_schedule(data, "deep_gdr", proto, rng), "deep_gdr")
    assert after.schedule and after.replace(schedule=()) == before.replace(schedule=())


def test_sampler_alone_is_reproducible():
    proto = get_protocol("deep_gdr")
    a = [SamplerSearch("deep_gdr", proto, 7).next_scenario() for _ in range(1)]
    b = [SamplerSearch("deep_gdr", proto, 7).next_scenario() for _ in range(1)]
    assert a == b
