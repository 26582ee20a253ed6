"""`epfuzz run CASE --backend verbs` of a finding soft-RoCE cannot show says so beside its clean verdict.

A pip user's C2b case came back "clean ... found in 0 of 1 runs on soft-RoCE", exit 0, nothing more:
read as "fixed". What rxe never exhibits is the backend's declared data (`VerbsBackend.cannot_show`, built
from the rule tables), and the case's rule cells are the sim's culprit rules of it. No guest here: the
verbs run itself is a stand-in returning the clean outcome the guest gave that user, so this tests the
message path and the capability data, not what rxe does (tests/guest and the agreement table's verbs
column do that in the guest).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epfuzz.backends import Outcome, blind_spot, get_backend
from epfuzz.backends.sim import SimBackend
from epfuzz.backends.verbs import VerbsBackend
from epfuzz.cases.corpus import load_case
from epfuzz.cli.commands import main
from epfuzz.model.ordering import NVLINK_CLAUSES, RULES

ROOT = Path(__file__).resolve().parents[2]
C2B = ROOT / "corpus" / "regressions" / "deepep661-c2b.json"
CROSS_QP = ROOT / "corpus" / "regressions" / "cross-qp-spec.json"   # needs no rule cell: arrival order


def test_soft_roce_declares_every_pcie_cell_and_ptx_clause_unshowable_and_cross_qp_timing_showable():
    blind = VerbsBackend().cannot_show()
    for cell in RULES.values():
        for clause in cell.rule.split("/"):
            assert "no PCIe" in blind[clause], clause
    assert set(NVLINK_CLAUSES) <= set(blind) and "AR" in blind
    assert not {"xQP", "cross-QP", "in-order"} & set(blind)
    assert get_backend("sim", require=False).cannot_show() == {}


def test_blind_spot_names_the_rules_the_sim_finding_needs_and_why(monkeypatch: pytest.MonkeyPatch):
    verbs = VerbsBackend()
    c2b, cross_qp = load_case(C2B).scenario, load_case(CROSS_QP).scenario
    line = blind_spot(verbs, c2b)
    assert line.startswith("backend verbs cannot show C2b, which this finding needs on the sim (soft-RoCE has no PCIe")
    assert line.endswith("clean here does not mean fixed")
    assert blind_spot(verbs, cross_qp) == ""     # arrival order across QPs: rxe shows that
    # a rule it cannot show, each reason said once
    monkeypatch.setattr(SimBackend, "run", lambda self, scn, proto, repeats=1: Outcome(
        "sim", object(), rules_fired=frozenset({"A2b", "C2b", "xQP"})))  # type: ignore[arg-type]
    line = blind_spot(verbs, c2b)
    assert line.startswith("backend verbs cannot show A2b, C2b, which") and line.count("soft-RoCE has no PCIe") == 1
    assert blind_spot(get_backend("sim", require=False), c2b) == ""


@pytest.fixture
def clean_soft_roce(monkeypatch: pytest.MonkeyPatch) -> None:
    """verbs available and every run clean, as the guest answered the trial's C2b case."""
    monkeypatch.setattr(VerbsBackend, "availability", lambda self: (True, "stand-in"))
    monkeypatch.setattr(VerbsBackend, "run", lambda self, scn, proto, repeats=1: Outcome(
        "verbs", None, runs=1, hits=0, summary="found in 0 of 1 runs on soft-RoCE"))


def test_a_clean_verbs_run_of_a_c2b_finding_says_soft_roce_cannot_show_it(clean_soft_roce, capsys):
    assert main(["run", str(C2B), "--backend", "verbs"]) == 0   # the verdict stays what the backend saw
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("deepep661-c2b: clean (") and "backend verbs" in out[0]
    assert out[1:] == ["  found in 0 of 1 runs on soft-RoCE",
                       "  backend verbs cannot show C2b, which this finding needs on the sim (soft-RoCE has no "
                       "PCIe: rxe places packets in memory with the CPU, so no PCIe ordering rule applies): clean "
                       "here does not mean fixed"]


def test_a_clean_verbs_run_of_a_finding_it_can_show_adds_nothing(clean_soft_roce, capsys):
    assert main(["run", str(CROSS_QP), "--backend", "verbs"]) == 0
    out = capsys.readouterr().out
    assert "cannot show" not in out and "found in 0 of 1 runs on soft-RoCE" in out


def test_replay_of_a_finding_verbs_cannot_show_says_so_under_its_changed_line(clean_soft_roce, capsys, tmp_path):
    """`replay --backend verbs` reported the C2b case CHANGED (finding -> clean) and nothing more, where `run`
    says the backend cannot show C2b; a finding it can show that came back clean adds nothing."""
    import shutil

    for case in (C2B, CROSS_QP):
        shutil.copy(case, tmp_path / case.name)
    assert main(["replay", "--backend", "verbs", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    at = next(i for i, x in enumerate(out) if x.startswith(f"CHANGED {tmp_path / C2B.name}: expected finding"))
    assert out[at + 1].startswith("  backend verbs cannot show C2b, which this finding needs on the sim")
    other = next(i for i, x in enumerate(out) if x.startswith(f"CHANGED {tmp_path / CROSS_QP.name}"))
    assert other + 1 == len(out) or not out[other + 1].startswith("  backend verbs cannot show")


def test_minimize_on_verbs_of_a_finding_it_cannot_show_says_why_nothing_reproduces(clean_soft_roce, capsys):
    assert main(["minimize", str(C2B), "--backend", "verbs"]) == 2
    err = capsys.readouterr().err
    assert "does not reproduce a finding on verbs; nothing to minimize (backend verbs cannot show C2b" in err, err
