"""Issue 18.5: 1-minimality covers schedules: in a minimized case, removing any one overtake
loses the finding (a swap, its undo and the swap again shrink to the one swap)."""

from __future__ import annotations

import json
from pathlib import Path

from epfuzz import codec
from epfuzz.backends.sim import SimBackend
from epfuzz.minimize import minimize
from epfuzz.protocols import get_protocol

CASE = json.loads(Path("corpus/regressions/deepep661-c2b.json").read_text())["scenario"]


def test_swap_undo_swap_shrinks_to_one_overtake_and_each_is_needed():
    d = json.loads(json.dumps(CASE))
    swap = {"stage": "pcie", "index": 15, "distance": 16}
    d["schedule"] = [swap, {"stage": "pcie", "index": 15, "distance": 1}, swap]
    proto, sim = get_protocol(d["protocol"]), SimBackend()
    scn = codec.load_dict(d)
    assert sim.run(scn, proto).violation is not None
    result = minimize(scn, proto).result
    assert len(result.schedule) == 1, result.schedule
    doc = result.to_dict()
    for i in range(len(doc["schedule"])):
        less = json.loads(json.dumps(doc))
        del less["schedule"][i]
        assert sim.run(codec.load_dict(less), proto).violation is None, i
