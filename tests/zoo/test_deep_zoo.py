"""The deep zoo (epfuzz/protocols/deep.py): each bad protocol is found from nothing by the schedule
sampler with a fixed seed within a bounded budget; each fixed protocol stays clean under the sampler and
random inputs. How deep they are for random inputs is measured by bench/depth.py (README)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from epfuzz import codec
from epfuzz.protocols import REGISTRY, get_protocol
from epfuzz.protocols.deep import DEEP_ZOO, GuardedReceiver
from epfuzz.sampler import SamplerSearch
from epfuzz.sim.engine import simulate

ROOT = Path(__file__).resolve().parents[2]
#: (seed, budget): the sampler's executions to the first finding with that seed, measured, times ~2-4
SAMPLER = {"deep_ro_signal": (1, 1500), "deep_remainder_flag": (1, 3000), "deep_flag_write": (1, 1000),
           "deep_notify_qp": (1, 3000), "deep_other_qp": (1, 2000), "deep_imm_other_qp": (1, 1500),
           "deep_gdr": (1, 1000), "deep_reset_race": (1, 3000)}
FIXED_EXECS = 300   # per search (sampler, random) per fixed protocol; the 100k soak is in README


def test_deep_zoo_has_eight_pairs_with_sources_harnesses_and_seeds():
    assert len(DEEP_ZOO) >= 8
    assert {z[2] for z in DEEP_ZOO} == set(SAMPLER)
    for _, _, bad, fixed in DEEP_ZOO:
        assert REGISTRY.items[bad].expect == "finding" and REGISTRY.items[fixed].expect == "clean"
        for name in (bad, fixed):
            assert REGISTRY.items[name].sources, name
            assert (ROOT / "harnesses" / f"{name}_fuzzer.py").exists(), name
            assert any((ROOT / "corpus" / f"{name}_fuzzer").iterdir()), name


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
    proto = get_protocol(bad)
    search = SamplerSearch(bad, proto, seed)
    for _ in range(budget):
        run = simulate(search.next_scenario(), proto)
        if run.violation is not None:
            return
    pytest.fail(f"{bad}: no finding in {budget} sampled schedules (seed {seed})")


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [z[3] for z in DEEP_ZOO])
def test_deep_fixed_protocol_clean_under_sampler_and_random(fixed):
    proto = get_protocol(fixed)
    search = SamplerSearch(fixed, proto, 11)
    rng = random.Random(11)
    for _ in range(FIXED_EXECS):
        for scn in (search.next_scenario(), codec.decode(rng.randbytes(rng.randrange(0, 129)), fixed)):
            run = simulate(scn, proto)
            assert run.violation is None, (run.violation.summary(), scn.to_json(None))
