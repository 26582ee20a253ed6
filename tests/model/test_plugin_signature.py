"""A plug-in's default signature keeps only the signal fields its ops follow (epfuzz.model.follows).

A tutorial plug-in that posts its own flag ignores signal.kind/other_qp/fence, yet they were part
of every finding's signature: 666 raw signatures for 2 bugs in a 10 s campaign."""

from __future__ import annotations

import pytest

from epfuzz.backends import get_backend
from epfuzz.backends.base import SIGNATURE_FIELDS
from epfuzz.ir import ops
from epfuzz.protocols import REGISTRY, get_protocol
from epfuzz.protocols.base import Protocol
from tests.receivers import OneChannelReceiver


class OwnFlag(Protocol):
    """Posts its own flag whatever the scenario's signal fields say."""

    name, expect = "own_flag", "finding"

    def fence(self, scn) -> bool:
        return False

    def sender(self, scn, layout, epoch):
        n = layout.tokens_in_channel[0] * layout.token_bytes
        return [[ops.Write(0, ops.DATA, 0, n), ops.WriteValue(0, ops.SIGNAL, 0, epoch + 1, fence=self.fence(scn))]]

    def receiver(self, scn, layout):
        return OneChannelReceiver(layout, lambda mem, epoch: mem.u64(ops.SIGNAL, 0) == epoch + 1)


class FencedFlag(OwnFlag):
    """Follows signal.fence, and nothing else of the signal."""

    name = "fenced_flag"

    def fence(self, scn) -> bool:
        return scn.signal.fence


@pytest.fixture(autouse=True)
def plugins():
    REGISTRY.items["tests_follow:OwnFlag"] = OwnFlag()
    REGISTRY.items["tests_follow:FencedFlag"] = FencedFlag()
    yield
    for k in ("tests_follow:OwnFlag", "tests_follow:FencedFlag"):
        REGISTRY.items.pop(k)


def fields(spec: str) -> tuple[str, ...]:
    return get_backend("sim").signature_fields(get_protocol(spec))


def test_a_plugin_that_posts_its_own_signal_keeps_no_signal_field():
    got = fields("tests_follow:OwnFlag")
    assert not [f for f in got if f.startswith("signal.")]
    assert "knobs.mr_relaxed" in got and "knobs.adaptive_routing" in got


def test_a_plugin_keeps_the_signal_field_it_follows():
    got = [f for f in fields("tests_follow:FencedFlag") if f.startswith("signal.")]
    assert got == ["signal.fence"]


def test_built_in_protocols_keep_the_whole_default():
    assert fields("dispatch_any") == SIGNATURE_FIELDS
