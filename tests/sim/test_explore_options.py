"""Exhaustive exploration drives the same receiver step as the replay, flush and read lag included."""

from __future__ import annotations

import random

import pytest

from epfuzz.encoding import codec
from epfuzz.infra.errors import InputError
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore


def gdr(name: str) -> Scenario:
    return codec.load_dict({"protocol": name, "payload": {"num_tokens": 1, "hidden_bytes": 16, "meta_bytes": 16},
                               "knobs": {"reorder_window": 64}})


def credit(name: str, lag: int) -> Scenario:
    return codec.load_dict({"protocol": name, "payload": {"num_tokens": 2, "epochs": 2, "hidden_bytes": 1024},
                               "chunking": {"max_payload": 512}, "faults": {"rx_lag": lag}})


def test_flush_on_accept_is_explored_and_the_flush_makes_it_safe():
    assert get_protocol("gdr_no_flush_fixed").flush_on_accept
    bad = explore(gdr("gdr_no_flush"), get_protocol("gdr_no_flush"))
    assert bad.violation is not None and bad.violation.kind == "stale-accept"
    good = explore(gdr("gdr_no_flush_fixed"), get_protocol("gdr_no_flush_fixed"))
    assert good.violation is None and good.states > 1


def test_read_lag_is_explored_and_reaches_the_early_credit_release():
    proto = get_protocol("early_credit_release")
    assert proto.release_at_accept
    res = explore(credit("early_credit_release", 8), proto)
    assert res.violation is not None and res.violation.kind == "overwritten-while-read"
    assert explore(credit("early_credit_release", 0), proto).violation is None  # nothing read late
    fixed = get_protocol("early_credit_release_fixed")
    assert explore(credit("early_credit_release_fixed", 8), fixed).violation is None


@pytest.mark.parametrize("name", ["early_credit_release", "early_credit_release_fixed", "gdr_no_flush",
                                  "gdr_no_flush_fixed", "dispatch_any"])
def test_every_schedule_simulate_finds_is_an_order_explore_finds(name):
    """Random small scenarios, each with its random schedule: a finding on that schedule is one of
    the orders the explorer enumerates, and a protocol expected clean stays clean under all of them."""
    proto = get_protocol(name)
    rng = random.Random(7)
    compared = 0
    for _ in range(30):
        scn = codec.decode(bytes(rng.randrange(256) for _ in range(rng.choice([16, 32, 64]))), name)
        scn = scn.with_path("payload.epochs", min(scn.payload.epochs, 2))
        scn = scn.with_path("payload.num_tokens", min(scn.payload.num_tokens, 3))
        if not proto.flush_on_accept:
            scn = scn.with_path("faults.rx_lag", rng.choice([0, 1, 2, 4]))
        try:
            res = explore(scn, proto, max_states=30_000)
        except InputError:  # too large to enumerate
            continue
        compared += 1
        if simulate(scn, proto).violation is not None:
            assert res.violation is not None, scn.to_json()
        if proto.expect == "clean":
            assert res.violation is None, scn.to_json()
    assert compared >= 15
