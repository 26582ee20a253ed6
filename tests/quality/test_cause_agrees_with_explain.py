"""The bug table's "knobs it needs" and `explain` agree (the first wave's lesson, found broken by
a protocol author on 2026-12-01): a 1-minimal case may keep a knob its own schedule needs though
the bug does not (adaptive routing for one packet move, where any cross-QP interleaving does as
well). The table said "adaptive_routing=True", explain said adaptive routing does not matter,
and the same race was listed as one bug per such knob."""

from __future__ import annotations

import pytest

from epfuzz.backends import get_backend
from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import REGISTRY
from epfuzz.protocols.base import Protocol
from epfuzz.triage.explain import explain
from epfuzz.triage.findings import root_cause
from tests.receivers import OneChannelReceiver


class SplitOverTwoQps(Protocol):
    """Channel 0's bytes, half on QP 0 and half on QP 1; one fetch-and-add on QP 0: a cross-QP race."""

    name, expect = "test_split_two_qps", "finding"
    fixed = {"knobs.mr_relaxed": False, "topology.num_qps": 2}
    signature_knobs = ("knobs.mr_relaxed", "knobs.nic_relaxed_ordering", "knobs.adaptive_routing",
                       "knobs.atomic_mode", "knobs.hca_o920")

    def sender(self, scn, layout, epoch):
        n = layout.tokens_in_channel[0] * layout.token_bytes
        half = n // 2 // 16 * 16
        return [[ops.Write(0, ops.DATA, 0, half), ops.Write(1, ops.DATA, half, n - half),
                 ops.AtomicAdd(0, ops.SIGNAL, 0, 1)]]

    def receiver(self, scn, layout):
        return OneChannelReceiver(layout, lambda mem, epoch: mem.u64(ops.SIGNAL, 0) == 1)


@pytest.fixture(autouse=True)
def registered():
    REGISTRY.add(SplitOverTwoQps())
    yield
    REGISTRY.items.pop("test_split_two_qps")


#: what the minimizer left of one finding: one packet move that needs adaptive routing to be made
CASE = {"protocol": "test_split_two_qps", "knobs": {"adaptive_routing": True},
        "schedule": [{"stage": "net", "index": 2, "distance": 1}],
        "topology": {"num_channels": 1, "num_qps": 2},
        "payload": {"num_tokens": 1, "hidden_bytes": 16, "scale_bytes": 0, "meta_bytes": 16, "epochs": 1}}


def test_the_cause_names_only_knobs_explain_says_the_finding_needs():
    scn = codec.load_dict(CASE)
    proto = REGISTRY.get("test_split_two_qps")
    out = get_backend("sim").run(scn, proto)
    assert out.violation is not None
    cause = root_cause(scn, out, proto)
    assert cause.endswith("|no signature knob"), cause   # its signature_knobs leave out knobs.ido, signal.*
    exp = explain(scn, proto)
    assert any("adaptive routing" in k for k in exp.knobs_irrelevant) and not exp.knobs_needed


def test_a_cause_over_restricted_signature_knobs_does_not_say_no_knob_where_explain_names_needed_knobs():
    """Trial 0205 item 6: a plug-in whose signature_knobs are ("topology.num_qps",) had root causes reading "no
    knob" while `explain` listed four knobs the finding needs (RO, atomic mode 4, ...): they were never asked.
    The column says what was asked, none of its signature knobs; the full list still says "no knob"."""
    from pathlib import Path

    from epfuzz.cases.corpus import load_case
    from epfuzz.repair.wrap import Repaired
    from epfuzz.triage.cause import NO_KNOB, NO_SIGNATURE_KNOB, none_needed

    scn = load_case(Path(__file__).resolve().parents[2] / "corpus/regressions/deepep661-c2b.json").scenario
    c2b = REGISTRY.get(scn.protocol)
    narrow = Repaired(c2b, [])  # the same protocol, no edit: its signature knobs narrowed as the plug-in's were
    narrow.signature_knobs = ("topology.num_qps",)
    assert none_needed(c2b) == NO_KNOB and none_needed(narrow) == NO_SIGNATURE_KNOB
    out = get_backend("sim").run(scn, narrow)
    assert out.violation is not None
    assert root_cause(scn, out, narrow).endswith("|C2b|no signature knob")
    assert len(explain(scn, narrow).knobs_needed) == 4   # what "no knob" denied


def _knob(line: str) -> str:
    """`label (knobs.x=value)[, pinned ...]` as the root cause writes it: `x=value`."""
    return line.split("(")[-1].split(")")[0].split(".")[-1]


def test_the_cause_and_explain_name_the_same_knobs_at_their_values():
    """DeepEP #661's minimized case under spec: the relaxed-ordering NIC, PCI atomic mode 4 and an HCA
    that does not enforce o9-20 are the bug; the table named the first two only (issue 26.4:
    explain listed mr_relaxed=True and hca_o920=False too), and under a preset said "simplest knobs"."""
    import json
    from pathlib import Path

    from epfuzz.cases.corpus import load_case

    case = load_case(Path(__file__).resolve().parents[2] / "corpus/regressions/deepep661-c2b.json")
    obj = json.loads(case.scenario.to_json())
    obj["preset"] = "spec"
    scn = codec.load_dict(obj)
    proto = REGISTRY.get(scn.protocol)
    out = get_backend("sim").run(scn, proto)
    cause = root_cause(scn, out, proto)
    want = "|C2b|mr_relaxed=True[protocol],nic_relaxed_ordering=True,atomic_mode=4,hca_o920=False"
    assert cause.endswith(want), cause
    knobs = cause.split("|")[-1].split(",")
    assert [k.removesuffix("[protocol]") for k in knobs] == [_knob(k) for k in explain(scn, proto).knobs_needed]
