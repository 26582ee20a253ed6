"""Issue 18.7: explain says only what the run and the posted ops support."""

from __future__ import annotations

import json
from pathlib import Path

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol
from epfuzz.triage.explain import explain
from examples.seqflag import SeqFlag

CASE = json.loads(Path("corpus/regressions/deepep661-c2b.json").read_text())["scenario"]


class FlagFirstFenced(SeqFlag):
    """Raises the flag *before* writing the message (a program-order bug), fencing its own WRs
    whatever `signal.fence` says."""

    name = "flag_first_fenced"

    def sender(self, scn, layout, epoch):
        progs = super().sender(scn, layout, epoch)
        return [[ops.WriteValue(o.qp, o.region, o.offset, o.value, fence=True) if isinstance(o, ops.WriteValue)
                 else o for o in reversed(p)] for p in progs]


def _scn(protocol: str, **over):
    d = json.loads(json.dumps(CASE))
    d["protocol"] = protocol
    d["schedule"] = []
    d["knobs"].update(mr_relaxed=True)
    for path, value in over.items():
        head, _, rest = path.partition("__")
        d[head][rest] = value
    return codec.load_dict(d)


def test_single_qp_finding_without_overtakes_is_not_timing_across_qps():
    proto = get_protocol("tests.model.test_explain_claims:FlagFirstFenced")
    scn = _scn("tests.model.test_explain_claims:FlagFirstFenced", topology__num_qps=1)
    text = explain(scn, proto).text()
    assert "timing across QPs" not in text, text
    assert "the order the protocol posts in" in text


def test_fence_judged_from_the_posted_ops():
    proto = get_protocol("tests.model.test_explain_claims:FlagFirstFenced")
    scn = _scn("tests.model.test_explain_claims:FlagFirstFenced", topology__num_qps=1)
    assert scn.signal.fence is False
    text = explain(scn, proto).text()
    assert "fence on the signal (signal.fence" not in text, text  # it was listed as "does not matter"
    assert "signal.fence=False: the same ops either way (it posts fenced WRs itself)" in text, text


def test_every_stale_chunk_is_counted():
    scn = codec.load_dict(json.loads(json.dumps(CASE)))
    exp = explain(scn, get_protocol(scn.protocol))
    v = exp.run.violation
    assert v.bad_bytes > 64 * 16  # more chunks than the violation lists
    line = next(x for x in exp.lines if x.startswith("stale bytes:"))
    count = int(line.split(" in ")[1].split()[0])
    assert count * 16 >= v.bad_bytes and count == v.stale_chunks, line
