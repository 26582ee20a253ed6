"""The finding sink: one case per signature, announced with its replay line."""

from __future__ import annotations

import io

from epfuzz.cases.corpus import load_case
from epfuzz.continuous.seeds import SEED_661
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.search.executor import SimExecutor
from epfuzz.search.sink import FindingSink


def test_a_signature_is_written_once_with_its_replay_line(tmp_path):
    scn = codec.load_dict(SEED_661)
    proto = get_protocol(scn.protocol)
    ex = SimExecutor(scn.protocol, proto, scn.preset).run(codec.encode(scn))
    out = io.StringIO()
    sink = FindingSink(tmp_path, scn.protocol, proto, out=out)
    path = sink.offer(ex.scenario, ex.data, ex.outcome)
    assert path is not None and load_case(path).scenario == scn
    assert sink.offer(ex.scenario, ex.data + b"\0", ex.outcome) is None      # same signature: dropped
    assert len(sink.findings) == 1 and len(list(tmp_path.glob("finding-*.json"))) == 1
    text = out.getvalue()
    assert "=== epfuzz finding" in text and "replay: " in text and str(path.name) in text
