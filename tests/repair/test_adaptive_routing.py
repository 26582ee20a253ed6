"""A repair's proof covers adaptive routing where the campaign that found the bug could draw it (new-user
trial, leftover item 1): `repair` called "signal on the data QP" [proven] for a flag WRITE on another QP,
its proof holding adaptive routing off as the case had it, while the same campaign's second bug was that
very form with adaptive routing on (a WRITE's payload may be placed out of order: the flag's packet
arrives before the data's). Where explore cannot decide the scenarios with it on, the status says so."""

from __future__ import annotations

import json

from epfuzz.cli.commands import main
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.repair import repair
from epfuzz.repair.proof import PROVEN_AR_IN_PART, ar_held, campaign, prove, with_ar
from epfuzz.repair.search import applicable
from epfuzz.repair.wrap import Repaired
from tests.conftest import ROOT


def _flag_on_other_qp(tokens: int = 1):
    """The trial's bug: the flag is an RDMA WRITE on the QP after the data's, adaptive routing off (free)."""
    return codec.load_dict({"protocol": "dispatch_any", "signal": {"kind": "write", "other_qp": True},
                            "topology": {"num_channels": 1, "num_qps": 2}, "payload": {"num_tokens": tokens}})


def test_the_flag_moved_onto_the_data_qp_is_refuted_with_adaptive_routing_on():
    case = _flag_on_other_qp()
    assert not case.knobs.adaptive_routing
    r = repair(case, get_protocol("dispatch_any"), campaign_execs=0, max_states=20_000)
    refuted = {c.names: c.proof.checks[-1] for c in r.refuted}
    assert "signal-on-data-qp" not in {c.names for c in r.repairs}
    last = refuted["signal-on-data-qp"]
    assert last.verdict == "reachable" and last.adaptive and last.label == "the case with adaptive routing on"


def test_with_the_flag_an_add_on_the_data_qp_the_proof_covers_adaptive_routing(capsys, tmp_path):
    """The responder executes an add in PSN order: proven, with every scenario explored again with adaptive
    routing on, and the text says what was held fixed."""
    case = tmp_path / "case.json"
    case.write_text(json.dumps(_flag_on_other_qp().to_dict()))
    assert main(["repair", str(case), "--edits", "signal-on-data-qp,atomic-signal", "--campaign-execs", "50",
                 "--max-states", "20000"]) == 0
    out = capsys.readouterr().out
    assert "repair 1: signal-on-data-qp + atomic-signal [proven]" in out
    assert "(each again with adaptive routing on)" in out
    assert "  adaptive routing: off as in the case, and on: each scenario explored again" in out
    assert "the case's platform: mr_relaxed=False, nic_relaxed_ordering=False" in out


def test_where_explore_cannot_decide_adaptive_routing_the_status_carries_the_bound():
    """Six tokens make 12 packets an epoch, more than explore enumerates under adaptive routing: the
    repair is proven for in-order delivery only, and its status says that rather than "proven"."""
    case = _flag_on_other_qp(tokens=6)
    r = repair(case, get_protocol("dispatch_any"), only=["signal-on-data-qp", "atomic-signal"], campaign_execs=0,
               max_states=20_000)
    (c,) = r.repairs
    assert c.proof.status == PROVEN_AR_IN_PART
    undecided = [k for k in c.proof.checks if k.verdict == "undecided"]
    assert undecided and all(k.adaptive for k in undecided)
    assert all(k.verdict == "unreachable" for k in c.proof.checks if not k.adaptive)


def test_a_preset_that_pins_adaptive_routing_off_keeps_proven_and_says_it_held_it():
    case = ROOT / "corpus" / "regressions" / "deepep661-c2b.json"
    from epfuzz.cases.replay import load_any

    scn = load_any(case, None, "spec", False).scenario
    r = repair(scn, get_protocol(scn.protocol), only=["strict-window"], campaign_execs=0, max_states=200_000)
    (c,) = r.repairs
    assert c.proof.status == "proven" and not any(k.adaptive for k in c.proof.checks)
    assert c.proof.ar_held == f"off, pinned by the preset {scn.preset}"
    assert any(b.startswith(f"adaptive_routing=off, pinned by the preset {scn.preset}: ") for b in c.proof.bounds)


def test_the_campaign_draws_adaptive_routing_where_the_proof_explores_it():
    """With exploration left out, the guided campaign alone finds the flag WRITE on the data QP overtaken
    once it may turn adaptive routing on (it held the case's value before)."""
    case = _flag_on_other_qp()
    proto = get_protocol("dispatch_any")
    rep = Repaired(proto, [e for e in applicable(case, proto) if e.name == "signal-on-data-qp"])
    assert campaign(case, rep, [case.replace(schedule=())], 200, ar=True)[0]


def test_a_protocol_that_pins_adaptive_routing_off_keeps_it_off_and_says_so():
    """The deep zoo's protocols pin it off (`_PLATFORM`): no scenario is explored with it on, and the bound
    says by what it was held."""
    case = codec.load_dict({"protocol": "deep_flag_write", "knobs": {"nic_relaxed_ordering": True,
                            "reorder_window": 4}, "chunking": {"tokens_per_wr": 1, "splits_per_token": 2},
                            "payload": {"num_tokens": 1}})
    proto = get_protocol("deep_flag_write")
    rep = Repaired(proto, [e for e in applicable(case, proto) if e.name == "strict-window"])
    assert ar_held(case, rep) == "off, pinned by the protocol" and with_ar(case) is None
    p = prove(case, rep, campaign_execs=0, max_states=20_000)
    assert p.status == "proven" and p.ar_held == "off, pinned by the protocol" and not p.ar_explored
    assert not any(k.adaptive for k in p.checks)
    assert any(b.startswith("adaptive_routing=off, pinned by the protocol: ") for b in p.bounds)


def test_a_case_whose_fields_make_no_scenario_with_adaptive_routing_keeps_it_off():
    """A case the codec would not load (here: a field out of its bounds, as a --raw input's may be) has no form
    with adaptive routing on: the proof holds it off and says why."""
    case = _flag_on_other_qp().with_path("payload.num_tokens", 0)
    proto = get_protocol("dispatch_any")
    assert ar_held(case, proto) == "off: the case's fields allow no adaptive routing"
