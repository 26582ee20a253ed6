"""One race across QPs is one bug, minimized to the fewest QPs, and the tools agree on what it needs.

A protocol author's plug-in (pip trial 2026-12-04, item 1) posted a channel's data on its QP and the
tail's fetch-and-add on the next QP: one mistake, reported as 4 bugs. Three were the same race reached
three ways (timing alone, an overtake at the responder `xQP`, one on the wire `cross-QP`); the fourth
was a "minimized" case that kept 7 QPs, its data on QP 6 slowed by a delay at index 6: every smaller
QP count cut `channel_qp` and the delays (the delay was lost), so the minimizer never left 7, and the
knob analysis, setting num_qps alone, made no valid scenario and called num_qps irrelevant ("no knob")
though one QP makes the finding unreachable. The plug-in here has the trial's shape, not its file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epfuzz.backends import get_backend
from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import REGISTRY
from epfuzz.protocols.base import Protocol
from epfuzz.triage.cause import needs
from epfuzz.triage.explain import explain
from epfuzz.triage.findings import root_cause, write_finding
from epfuzz.triage.group import group
from epfuzz.triage.minimize import minimize, reduce_knobs
from epfuzz.triage.remap import relabelled, remapped
from tests.receivers import OneChannelReceiver

NAME = "test_tail_on_next_qp"


class TailOnNextQp(Protocol):
    """Tokens by RDMA WRITE on the channel's QP, the tail raised on QP (qp + 1) % num_qps."""

    name, expect = NAME, "finding"
    fixed = {"knobs.mr_relaxed": False}   # strict window: only the other QP can reorder
    signature_knobs = ("topology.num_qps",)

    def sender(self, scn, layout, epoch):
        qp = scn.qp_of_channel(0)
        prog = []
        for t in range(layout.tokens_in_channel[0]):
            prog.append(ops.Write(qp, ops.DATA, layout.slot_offset(0, t), layout.token_bytes))
            prog.append(ops.AtomicAdd((qp + 1) % scn.topology.num_qps, ops.SIGNAL, 0, 1))
        return [prog] + [[] for _ in range(1, layout.num_channels)]

    def receiver(self, scn, layout):
        return OneChannelReceiver(layout, lambda mem, epoch: mem.u64(ops.SIGNAL, 0) >= layout.tokens_in_channel[0])


@pytest.fixture(autouse=True)
def registered():
    REGISTRY.add(TailOnNextQp())
    yield
    REGISTRY.items.pop(NAME)


SHAPE = {"num_tokens": 1, "hidden_bytes": 16, "scale_bytes": 0, "meta_bytes": 16, "epochs": 1}
#: the trial's "no knob" case: 7 QPs, the data on QP 6, which is slowed
SEVEN = {"protocol": NAME, "topology": {"num_channels": 1, "num_qps": 7, "channel_qp": [6]},
         "faults": {"qp_delay_ns": [0, 0, 0, 0, 0, 0, 21]}, "payload": SHAPE}
#: the same race, reached three ways: timing alone, an overtake at the responder, one on the wire
WAYS = [
    {"protocol": NAME, "topology": {"num_channels": 1, "num_qps": 2}, "faults": {"qp_rate_div": [9]},
     "payload": SHAPE},
    {"protocol": NAME, "knobs": {"atomic_mode": 4}, "topology": {"num_channels": 1, "num_qps": 2},
     "schedule": [{"stage": "pcie", "index": 1, "distance": 1}], "payload": SHAPE},
    {"protocol": NAME, "knobs": {"adaptive_routing": True}, "topology": {"num_channels": 1, "num_qps": 2},
     "schedule": [{"stage": "net", "index": 1, "distance": 1}], "payload": SHAPE},
]


def _finding(doc):
    scn = codec.load_dict(doc)
    out = get_backend("sim").run(scn, REGISTRY.get(NAME))
    assert out.violation is not None, doc
    return scn, out


def test_the_minimizer_takes_the_qps_down_and_the_delay_follows_its_qp():
    scn, _ = _finding(SEVEN)
    proto = REGISTRY.get(NAME)
    mz = minimize(scn, proto, max_runs=5_000)
    assert mz.complete and mz.result.topology.num_qps == 2, mz.result.to_json()
    data_qp = mz.result.qp_of_channel(0)
    assert mz.result.faults.qp_delay_ns[data_qp] > 0, mz.result.to_json()   # the data QP is the slow one
    assert data_qp == 0, mz.result.to_json()   # relabelled to the lowest QP, its delay with it
    cause = root_cause(mz.result, mz.outcome, proto)
    assert cause.endswith("|in-order|num_qps=2"), cause


def test_the_knob_analysis_and_explain_say_the_qp_count_matters():
    """On the 7-QP case as found: one QP kills the finding, so num_qps is needed, not irrelevant."""
    scn, out = _finding(SEVEN)
    proto = REGISTRY.get(NAME)
    got = needs(scn, proto, out.violation.kind, ("topology.num_qps",), shape=False)
    assert [n.path for n in got.knobs] == ["topology.num_qps"] and 1 in got.knobs[0].without
    assert "topology.num_qps" not in got.irrelevant
    exp = explain(scn, proto)
    assert any("topology.num_qps=7" in k for k in exp.knobs_needed)
    assert not any("num_qps" in k for k in exp.knobs_irrelevant)


def test_one_race_across_qps_is_one_bug_whichever_way_it_was_found(tmp_path: Path):
    proto = REGISTRY.get(NAME)
    raw = tmp_path / "raw"
    raw.mkdir()
    paths = []
    for doc in [*WAYS, SEVEN]:
        scn, out = _finding(doc)
        paths.append(write_finding(raw, scn, codec.encode(scn), out, proto))
    assert len({p.name for p in paths}) == 4
    got = group(sorted(paths), tmp_path / "bugs", cache=False)
    assert [b.cause for b in got.bugs] == [f"{NAME}|spec|stale-accept|in-order|num_qps=2"], \
        [b.cause for b in got.bugs]
    assert got.bugs[0].count == 4 and not got.left


def test_fewer_units_renumber_what_refers_to_them():
    """A count lowered keeps the units the case uses, in order: a channel's QP, the per-QP lists and a
    spin's channel follow their unit; nothing to renumber where every unit used is below the count."""
    doc = codec.load_dict({**SEVEN, "faults": {"qp_delay_ns": [5, 0, 0, 0, 0, 0, 21], "qp_rate_div": [1, 3]}}).to_dict()
    two = remapped(doc, "topology.num_qps", 3)
    assert two is not None
    assert (two["topology"]["channel_qp"], two["faults"]["qp_delay_ns"], two["faults"]["qp_rate_div"]) == \
        ([2], [5, 0, 21], [1, 3])
    assert remapped(doc, "topology.num_qps", 2) is None   # 3 QPs used: 2 cannot keep them
    spins = codec.load_dict({"protocol": NAME, "topology": {"num_channels": 4},
                             "faults": {"spins": [{"channel": 3, "before_op": 0, "ns": 9}]}}).to_dict()
    one = remapped(spins, "topology.num_channels", 1)
    assert one is not None and one["faults"]["spins"][0]["channel"] == 0
    assert remapped(codec.load_dict(WAYS[0]).to_dict(), "topology.num_qps", 1) is None


def test_a_hardware_cause_takes_the_qps_down_too():
    """`reduce_knobs` (verbs, cuda: only the signature knobs are reduced) sets a value the same way."""
    scn, _ = _finding(SEVEN)
    got = reduce_knobs(scn, REGISTRY.get(NAME), get_backend("sim"), ("topology.num_qps",))
    assert got is not None and got[0].topology.num_qps == 2, got and got[0].to_json()


def test_two_units_swap_with_what_they_carry():
    doc = codec.load_dict({**SEVEN, "topology": {"num_channels": 1, "num_qps": 2, "channel_qp": [1]},
                           "faults": {"qp_delay_ns": [0, 21], "qp_rate_div": [3]}}).to_dict()
    got = relabelled(doc, "topology.num_qps", 1, 0)
    assert (got["topology"]["channel_qp"], got["faults"]["qp_delay_ns"], got["faults"]["qp_rate_div"]) == \
        ([0], [21], [1, 3])


def test_only_a_race_across_qps_is_traded_for_timing():
    """The schedule-for-timing trade keeps a candidate of the same kind: a finding that needs a PCIe
    overtake (#661's C2b) could become another race of that kind and be grouped as it (review). The trade
    is offered only where the sim's culprits are cross-QP cells."""
    from epfuzz.cases.corpus import load_case
    from epfuzz.encoding.pins import fixed_fields
    from epfuzz.protocols import get_protocol
    from epfuzz.triage.passes import Ctx, _across_qps_only

    c2b = load_case(Path(__file__).resolve().parents[2] / "corpus" / "regressions" / "deepep661-c2b.json").scenario
    assert c2b.schedule
    assert not _across_qps_only(Ctx(c2b, get_protocol(c2b.protocol), fixed_fields(c2b.protocol, c2b.preset)))
    for doc in WAYS:
        scn, _ = _finding(doc)
        assert _across_qps_only(Ctx(scn, REGISTRY.get(NAME), fixed_fields(scn.protocol, scn.preset))), doc


def test_the_passes_context_keeps_one_build_and_one_run_per_case():
    """`Ctx` builds and simulates its case once, whichever passes ask (`remove_entries` reads the run's culprits,
    the shape and schedule passes the build), and a new current case drops both: no pass reads the last one's."""
    from epfuzz.cases.corpus import load_case
    from epfuzz.encoding.pins import fixed_fields
    from epfuzz.protocols import get_protocol
    from epfuzz.triage.passes import Ctx

    c2b = load_case(Path(__file__).resolve().parents[2] / "corpus" / "regressions" / "deepep661-c2b.json").scenario
    ctx = Ctx(c2b, get_protocol(c2b.protocol), fixed_fields(c2b.protocol, c2b.preset))
    run, built = ctx.simulated(), ctx.run()
    assert run is ctx.simulated() and built is ctx.run() and run is not built
    assert run.scenario is c2b and run.violation is not None and built.scenario is c2b
    bare = c2b.replace(schedule=())
    ctx.scn = bare
    assert ctx.doc == bare.to_dict() and ctx.doc != c2b.to_dict()
    assert ctx.simulated().scenario is bare and ctx.simulated().violation is None and ctx.run().scenario is bare


def _per_channel(doc):
    """Each channel's QP delay, and which channels share a QP: what renumbering QPs must keep."""
    scn = codec.load_dict(doc)
    qps = [scn.qp_of_channel(c) for c in range(scn.topology.num_channels)]
    delay = list(scn.faults.qp_delay_ns)
    return ([delay[q] if q < len(delay) else 0 for q in qps],
            [[c for c in range(len(qps)) if qps[c] == q] for q in qps])


def test_a_channel_with_no_qp_entry_keeps_its_qp_when_the_qps_are_renumbered():
    """A channel with no `channel_qp` entry is on QP channel % num_qps (Scenario.qp_of_channel): the units used
    counted only the listed channels, so with 4 QPs, channel 0 listed on the slow QP 3 and channel 1 unlisted on
    QP 1, two QPs renumbered QP 3 to 1 and left channel 1 to fall on 1 % 2 = 1, the slow QP beside channel 0; a
    swap of QPs 0 and 1 moved QP 1's delay to QP 0 and left the unlisted channel 1 on QP 1, without it."""
    doc = codec.load_dict({"protocol": NAME, "topology": {"num_channels": 2, "num_qps": 4, "channel_qp": [3]},
                           "faults": {"qp_delay_ns": [0, 0, 0, 21]}, "payload": SHAPE}).to_dict()
    two = remapped(doc, "topology.num_qps", 2)
    assert two is not None and two["topology"]["num_qps"] == 2
    assert _per_channel(two) == _per_channel(doc) == ([21, 0], [[0], [1]]), two
    unlisted = codec.load_dict({"protocol": NAME, "topology": {"num_channels": 2, "num_qps": 2},
                                "faults": {"qp_delay_ns": [0, 21]}, "payload": SHAPE}).to_dict()
    swapped = relabelled(unlisted, "topology.num_qps", 1, 0)
    assert swapped["faults"]["qp_delay_ns"] == [21]
    assert _per_channel(swapped) == _per_channel(unlisted) == ([0, 21], [[0], [1]]), swapped
    # each channel already on the QP it keeps: nothing to renumber, and cutting loses nothing
    spare = codec.load_dict({**unlisted, "topology": {"num_channels": 2, "num_qps": 4}}).to_dict()
    assert remapped(spare, "topology.num_qps", 2) is None
    four = codec.load_dict({"protocol": NAME, "topology": {"num_channels": 6, "num_qps": 4},
                            "faults": {"qp_delay_ns": [0, 21]}, "payload": SHAPE}).to_dict()
    assert remapped(four, "topology.num_qps", 3) is None  # channels 3 and 5 on QPs 3 and 1: four QPs used
