"""The receiver looks once as each epoch starts, before any of its TLPs lands.

A spinning receiver reads memory the moment an epoch begins. The model polled only after a TLP
landed in a watched region, so a receiver that accepted a counter left by the previous epoch
(`head >= tokens` where it should test `head == tokens * (epoch + 1)`) was clean on sim and
"unreachable" under explore with one channel; a protocol author found it (2026-12-01). The look
is the same in replay and explore (one `Receiving.wake`), and a correct receiver stays clean.
"""

from __future__ import annotations

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import REGISTRY
from epfuzz.protocols.base import Protocol
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore
from epfuzz.triage.explain import explain
from tests.receivers import OneChannelReceiver


class CumulativeHead(Protocol):
    reset_signals = False
    strict = False

    def sender(self, scn, layout, epoch):
        n = layout.tokens_in_channel[0]
        return [[ops.Write(0, ops.DATA, layout.slot_offset(0, 0), n * layout.token_bytes),
                 ops.AtomicAdd(0, ops.SIGNAL, 0, n)]]

    def receiver(self, scn, layout):
        n = layout.tokens_in_channel[0]

        def ready(mem, epoch: int) -> bool:  # the head counter: fetch-and-add, never reset
            head = mem.u64(ops.SIGNAL, 0)
            return head == n * (epoch + 1) if self.strict else head >= n

        return OneChannelReceiver(layout, ready)


class StaleHead(CumulativeHead):
    name, expect = "test_stale_head", "finding"


class ExactHead(CumulativeHead):
    name, expect, strict = "test_exact_head", "clean", True


@pytest.fixture(autouse=True)
def registered():
    """Registered for this module's tests only: the zoo tests read the registry."""
    for p in (StaleHead(), ExactHead()):
        REGISTRY.add(p)
    yield
    for name in ("test_stale_head", "test_exact_head"):
        REGISTRY.items.pop(name, None)


def scenario(protocol: str, epochs: int = 2):
    return codec.load_dict({"protocol": protocol, "topology": {"num_channels": 1, "num_qps": 1},
                            "payload": {"num_tokens": 2, "hidden_bytes": 16, "scale_bytes": 0, "meta_bytes": 16,
                                        "epochs": epochs}})


def test_a_counter_left_by_the_last_epoch_is_accepted_as_the_epoch_starts():
    run = simulate(scenario("test_stale_head"), REGISTRY.get("test_stale_head"))
    v = run.violation
    assert v is not None and v.kind == "stale-accept" and v.epoch == 1
    assert v.trigger == -1  # no TLP woke it: the epoch's first look
    assert "receiver looks as epoch 1 starts, before any of its TLPs" in "\n".join(
        explain(scenario("test_stale_head"), REGISTRY.get("test_stale_head")).lines)


def test_explore_reaches_it_and_proves_the_exact_check_safe():
    assert explore(scenario("test_stale_head"), REGISTRY.get("test_stale_head")).violation is not None
    assert explore(scenario("test_exact_head", 3), REGISTRY.get("test_exact_head")).violation is None


@pytest.mark.parametrize("epochs", [1, 2, 3])
def test_the_exact_check_is_clean_in_replay(epochs):
    assert simulate(scenario("test_exact_head", epochs), REGISTRY.get("test_exact_head")).violation is None


def test_one_epoch_has_nothing_stale_to_accept():
    assert simulate(scenario("test_stale_head", 1), REGISTRY.get("test_stale_head")).violation is None
