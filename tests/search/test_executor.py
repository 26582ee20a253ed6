"""The executor runs each input once and its outcome is that run's (no second simulation)."""

from __future__ import annotations

import pytest

from epfuzz.backends.sim import SimBackend
from epfuzz.continuous.seeds import SEED_661
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.search.executor import SimExecutor
from epfuzz.sim.engine import simulate


def test_a_violating_input_is_simulated_once_and_its_outcome_matches_the_backend():
    calls = []

    def counting(scn, proto):
        calls.append(scn)
        return simulate(scn, proto)

    scn = codec.load_dict(SEED_661)
    proto = get_protocol(scn.protocol)
    ex = SimExecutor(scn.protocol, proto, scn.preset, execute=counting).run(codec.encode(scn))
    assert ex.violation is not None
    out = ex.outcome
    assert len(calls) == 1
    ref = SimBackend().run(scn, proto)
    assert (out.violation.summary(), out.rules_fired, out.summary) == (ref.violation.summary(), ref.rules_fired,
                                                                        ref.summary)
    assert ex.units == sum(t.n for t in ex.run.order) > 0


def test_an_input_whose_protocol_code_raises_is_counted_as_executed():
    """A campaign whose first (seed) input raised in the plug-in reported "0 execs" (author trial): the
    input ran; the count is of inputs run, as libFuzzer counts the one that crashed."""

    def raising(scn, proto):
        raise ZeroDivisionError("the plug-in's own bug")

    scn = codec.load_dict(SEED_661)
    ex = SimExecutor(scn.protocol, get_protocol(scn.protocol), scn.preset, execute=raising)
    with pytest.raises(ZeroDivisionError):
        ex.run(codec.encode(scn))
    assert ex.execs == 1
