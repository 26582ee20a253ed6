"""Both backends read every op the same way: the in-order case gives the same outcome kind.

Runs inside the epfuzz soft-RoCE guest (tests/verbs/ boots it). In order means no overtakes on
the sim and no faults on verbs; three channels share one QP (where a completion's channel must
come from the posting channel and `cq_slot`, not from the immediate) over two epochs.
"""

from __future__ import annotations

import os

import pytest

from epfuzz.backends import get_backend
from epfuzz.backends.verbs import refusal
from epfuzz.encoding import codec
from epfuzz.encoding.pins import fixed_fields
from epfuzz.infra.errors import Unsupported
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import REGISTRY, get_protocol

pytestmark = pytest.mark.skipif(os.environ.get("EPFUZZ_IN_GUEST") != "1",
                                reason="runs inside the epfuzz soft-RoCE guest (tests/verbs/ boots it)")

#: in-order findings that are a window, not a wrong byte: the sim's receiver looks after every TLP,
#: the real one every few hundred microseconds and may miss it (shared_counter: the other channels'
#: adds reach channel 0's count just before its last token lands); verbs must not report another kind
RACES = ("shared_counter",)
PLUGINS = ("examples.seqflag:SeqFlag", "examples.seqflag:SeqFlagAtomic", "tests.guest.imm_length:ImmLength")
CASES = [(name, None) for name in (*REGISTRY.items, *PLUGINS) if name != "dispatch_any"] + [
    ("dispatch_any", kind) for kind in ("faa", "write", "write_imm", "send")]


def in_order(name: str, kind: str | None) -> Scenario:
    """The shape above, less the fields the protocol pins (the deep zoo pins its slot size and signal)."""
    pinned = fixed_fields(name, "spec")
    doc: dict = {"protocol": name}
    shape = {"payload.num_tokens": 6, "payload.hidden_bytes": 1024, "payload.epochs": 2,
             "topology.num_channels": 3, "topology.num_qps": 1, "signal.interval": 1, "signal.kind": kind}
    for path, value in shape.items():
        if value is not None and path not in pinned:
            sec, field = path.split(".")
            doc.setdefault(sec, {})[field] = value
    return codec.load_dict(doc)


def kind_of(out) -> str:
    return out.violation.kind if out.violation else "clean"


@pytest.mark.parametrize("name, kind", CASES)
def test_sim_and_verbs_agree_on_the_in_order_case(name, kind):
    scn = in_order(name, kind)
    proto = get_protocol(name)
    why = refusal(scn, proto)
    if why:  # ops verbs has no form for (copy engine, the GPU's send-buffer accesses, TMA): said, never faked
        with pytest.raises(Unsupported) as refused:
            get_backend("verbs").run(scn, proto, repeats=2)
        assert str(refused.value) == why
        return
    sim = get_backend("sim").run(scn, proto)
    verbs = get_backend("verbs").run(scn, proto, repeats=2)
    expect = {kind_of(sim), "clean"} if name in RACES else {kind_of(sim)}
    assert kind_of(verbs) in expect, f"sim: {sim.summary} | verbs: {verbs.summary}"
