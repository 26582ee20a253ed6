"""A built-in (exact `DispatchProtocol`) instance whose `sender` is set on the instance posts that sender's ops
(review2 of issue 31: the build asked `sender_recs` of every exact DispatchProtocol, and a patched or wrapped
`sender` was bypassed with no error: its fences were never posted)."""

from __future__ import annotations

import copy
import dataclasses

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate


def test_instance_sender_is_the_one_posted(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    p = copy.copy(get_protocol("dispatch_any"))
    p._memo_scn, p._memo_lay, p._memo_epoch, p._memo = None, None, -1, ()
    orig = p.sender

    def fenced(scn, lay, epoch):  # type: ignore[no-untyped-def]
        return [[dataclasses.replace(o, fence=True) if isinstance(o, (ops.WriteValue, ops.AtomicAdd)) else o
                 for o in prog] for prog in orig(scn, lay, epoch)]

    monkeypatch.setattr(p, "sender", fenced)
    scn = codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 2},
                           "payload": {"num_tokens": 6, "epochs": 2}})
    run = simulate(scn, p)
    signals = [w for w in run.wrs if isinstance(w.op, (ops.WriteValue, ops.AtomicAdd))]
    assert signals and all(w.op.fence for w in signals)  # ae43e97: none fenced
