"""On the #661 case, repair proposes the strict window of #674 (proven) and the other single edits that
also suffice; the CLI prints the proof and its replay command."""

from __future__ import annotations

import pytest

from epfuzz.cases.replay import load_any
from epfuzz.cli.commands import main
from epfuzz.protocols import get_protocol
from epfuzz.repair import repair
from epfuzz.triage.findings import epfuzz_command
from tests.conftest import ROOT

CASE = ROOT / "corpus" / "regressions" / "deepep661-c2b.json"


@pytest.fixture(scope="module")
def report():
    scn = load_any(CASE, None, "spec", False).scenario
    return repair(scn, get_protocol(scn.protocol), campaign_execs=200, max_states=200_000)


def test_the_strict_window_is_proven(report):
    first = report.repairs[0]
    assert first.names == "strict-window" and first.proof.status == "proven"
    assert first.extra_ops == 0 and first.proof.campaign_execs == 200
    labels = {k.label for k in first.proof.checks}
    assert {"the case", "tokens + 1", "channels + 1", "QPs + 1", "epochs + 1"} <= labels


def test_the_other_single_edits_that_suffice_and_those_that_do_not(report):
    survivors = {c.names: c.proof.status for c in report.repairs}
    assert survivors.get("flush-on-accept") in ("proven", "not proven")   # a flush read before use (B2a)
    refuted = {c.names for c in report.refuted}
    # a Flush is local completion only, a fence waits for atomics only: neither orders the RO data
    assert {"flush-before-signal", "fence-signal"} <= refuted


def test_the_cli_proves_one_edit_and_prints_its_replay(capsys):
    assert main(["repair", str(CASE), "--edits", "strict-window", "--campaign-execs", "50",
                 "--max-states", "20000"]) == 0
    out = capsys.readouterr().out
    assert "repair 1: strict-window [proven]" in out
    assert f"replay the proof: {epfuzz_command()} repair {CASE} --edits strict-window --campaign-execs 50" in out


def test_an_unknown_edit_is_a_one_line_error(capsys):
    assert main(["repair", str(CASE), "--edits", "no-such-edit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown edit(s) no-such-edit" in err[0]


def test_a_fixed_case_has_nothing_to_repair(capsys):
    assert main(["repair", str(ROOT / "corpus" / "regressions" / "deepep674-fixed.json"),
                 "--campaign-execs", "0"]) == 0
    assert "nothing to repair" in capsys.readouterr().out
