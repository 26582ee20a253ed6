"""What a repair proof says about itself (review of the adaptive-routing proofs): the case's platform as the case
has it, with what the edits set; adaptive routing explored on as its own line, not as a bound held fixed;
undecided scenarios grouped by why with the remedy for that reason; the status counting the undecided
scenarios with adaptive routing on; neighbours adaptive routing cannot be turned on in, named."""

from __future__ import annotations

import json

from epfuzz.cases.replay import load_any
from epfuzz.cli.commands import main
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.repair import proof as proof_mod
from epfuzz.repair import repair
from epfuzz.repair.proof import PROVEN_AR_IN_PART, prove, undecided_groups
from epfuzz.repair.search import applicable
from epfuzz.repair.text import proof_lines
from epfuzz.repair.wrap import Repaired
from tests.conftest import ROOT

C2B = ROOT / "corpus" / "regressions" / "deepep661-c2b.json"


def _flag_on_other_qp(tokens: int):
    return codec.load_dict({"protocol": "dispatch_any", "signal": {"kind": "write", "other_qp": True},
                            "topology": {"num_channels": 1, "num_qps": 2}, "payload": {"num_tokens": tokens}})


def _repaired(case, names):
    proto = get_protocol(case.protocol)
    return Repaired(proto, [e for e in applicable(case, proto, names)])


def test_the_platform_line_is_the_cases_and_says_what_the_edit_sets(capsys):
    """c2b has mr_relaxed=True; strict-window pins it False for the repaired protocol. The line printed
    mr_relaxed=False as if the case had it."""
    scn = load_any(C2B, None, "spec", False).scenario
    assert scn.knobs.mr_relaxed
    assert main(["repair", str(C2B), "--edits", "strict-window", "--campaign-execs", "0",
                 "--max-states", "20000"]) == 0
    out = capsys.readouterr().out
    assert "the case's platform: mr_relaxed=True, nic_relaxed_ordering=True" in out
    assert "strict-window sets mr_relaxed=False" in out


def test_adaptive_routing_explored_on_is_not_listed_as_held_fixed():
    case = _flag_on_other_qp(1)
    p = prove(case, _repaired(case, ["signal-on-data-qp", "atomic-signal"]), campaign_execs=0, max_states=20_000)
    assert p.status == "proven" and p.ar_explored.startswith("off as in the case, and on: ")
    assert not any(b.startswith("adaptive_routing=") for b in p.bounds)
    lines = proof_lines(p)
    assert f"  adaptive routing: {p.ar_explored}" in lines
    held = next(line for line in lines if line.startswith("  the proof held fixed: "))
    assert "adaptive_routing" not in held


def test_a_neighbour_adaptive_routing_cannot_be_turned_on_in_is_named(monkeypatch):
    """A neighbour whose adaptive-routing form is no valid scenario was dropped while the text said each
    scenario was explored again with it on."""
    case = _flag_on_other_qp(1)
    real = proof_mod.with_ar
    monkeypatch.setattr(proof_mod, "with_ar", lambda s: None if s.payload.num_tokens > 1 else real(s))
    p = prove(case, _repaired(case, ["signal-on-data-qp", "atomic-signal"]), campaign_execs=0, max_states=20_000)
    assert p.ar_missing == ["tokens + 1"] and "tokens + 1 with adaptive routing on" not in [k.label for k in p.checks]
    assert "(each again with adaptive routing on, but tokens + 1: adaptive routing makes no valid scenario " \
           "there)" in proof_lines(p)[0]


def test_undecided_scenarios_are_grouped_by_why_with_a_remedy_each():
    """Three tokens make 6 packets an epoch, within explore's adaptive-routing limit: the case is decided
    with it on, only larger neighbours are not (minimizing the case would not help); two others ran out of
    states (--max-states would). The text gave one reason and "minimize the case first" for all."""
    case = _flag_on_other_qp(3)
    p = prove(case, _repaired(case, ["signal-on-data-qp", "atomic-signal"]), campaign_execs=0, max_states=20_000)
    assert p.status == PROVEN_AR_IN_PART
    groups = {why: (remedy, labels) for why, remedy, labels in undecided_groups(p)}
    remedy, labels = groups["more packets an epoch than explore enumerates with adaptive routing on (limit 7)"]
    assert "the case with adaptive routing on" not in labels and "tokens x 2 with adaptive routing on" in labels
    assert remedy.startswith("none: ") and "minimize" not in remedy
    remedy, labels = groups["over the state budget (20,000 states)"]
    assert remedy == "raise --max-states" and "epochs + 1 with adaptive routing on" in labels
    assert len(groups) == 2
    text = proof_lines(p)
    assert any(line.startswith("    not decided, over the state budget (20,000 states), for 2 scenario(s): ")
               for line in text)
    big = prove(_flag_on_other_qp(6), _repaired(case, ["signal-on-data-qp", "atomic-signal"]), campaign_execs=0,
                max_states=20_000)
    assert any("the case with adaptive routing on" in labels and "minimize" in remedy
               for _, remedy, labels in undecided_groups(big))


def test_the_status_counts_the_undecided_scenarios_with_adaptive_routing_on(capsys, tmp_path):
    path = tmp_path / "case.json"
    path.write_text(json.dumps(_flag_on_other_qp(3).to_dict()))
    assert main(["repair", str(path), "--edits", "signal-on-data-qp,atomic-signal", "--campaign-execs", "0",
                 "--max-states", "20000"]) == 0
    out = capsys.readouterr().out
    case = _flag_on_other_qp(3)
    p = prove(case, _repaired(case, ["signal-on-data-qp", "atomic-signal"]), campaign_execs=0, max_states=20_000)
    ar = [k for k in p.checks if k.adaptive]
    undecided = sum(k.verdict == "undecided" for k in ar)
    assert 0 < undecided < len(ar)   # some scenarios with it on were decided: "without adaptive routing" was wrong
    assert (f"[{PROVEN_AR_IN_PART}: {undecided} of {len(ar)} scenarios with it on undecided]") in out


def test_refuted_on_names_the_scenario_for_the_text_and_the_bench():
    case = _flag_on_other_qp(1)
    r = repair(case, get_protocol("dispatch_any"), only=["signal-on-data-qp"], campaign_execs=0, max_states=20_000)
    (c,) = r.refuted
    where, what = c.proof.refuted_on
    assert where == "the case with adaptive routing on" and "accepted" in what


def test_a_repair_proven_only_in_part_leaves_its_supersets_to_be_tried(monkeypatch):
    """geometry_index's receiver-slot is proven with adaptive routing undecided: the pairs that contain it may
    be proven outright, so the search proves them (it skipped every one); one no stronger is not reported."""
    from epfuzz.repair import search

    case = codec.load_dict({"protocol": "geometry_index", "topology": {"num_channels": 3},
                            "payload": {"num_tokens": 4}})
    tried = []
    real = search.prove

    def spy(scn, rep, *a, **k):
        tried.append(frozenset(e.name for e in rep.edits))
        return real(scn, rep, *a, **k)

    monkeypatch.setattr(search, "prove", spy)
    r = repair(case, get_protocol("geometry_index"), max_edits=2, campaign_execs=0, max_states=2000)
    assert [(c.names, c.proof.status) for c in r.repairs] == [("receiver-slot", PROVEN_AR_IN_PART)]
    pairs = [t for t in tried if len(t) == 2]
    assert pairs and all("receiver-slot" in t for t in pairs)
