"""A plug-in protocol with 33-64 tokens on one channel (issue 34.1's shape), for the search tests."""

from __future__ import annotations

from epfuzz.ir import ops
from epfuzz.protocols.base import Protocol
from tests.receivers import OneChannelReceiver


class ManyTokens(Protocol):
    """All of channel 0's tokens in one WRITE, then a flag: clean only where the flag cannot pass them."""

    name, expect = "many_tokens", "finding"
    fixed = {"topology.num_channels": 1, "topology.num_qps": 1, "payload.epochs": 1, "payload.num_tokens": 48}

    def sender(self, scn, layout, epoch):
        n = layout.tokens_in_channel[0] * layout.token_bytes
        return [[ops.Write(0, ops.DATA, 0, n), ops.WriteValue(0, ops.SIGNAL, 0, epoch + 1)]]

    def receiver(self, scn, layout):
        return OneChannelReceiver(layout, lambda mem, epoch: mem.u64(ops.SIGNAL, 0) == epoch + 1)
