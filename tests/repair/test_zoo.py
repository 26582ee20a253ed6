"""`repair` on every zoo and deep-zoo bad protocol proposes its fixed form's change (or a smaller one, proven
safe), and on each fixed form, on the same shape, finds nothing to repair (issue 32.4).

The case is a small finding of the bad protocol (bench/repair.py's `small_case`: a deep-zoo corner
shape, a seed scenario explore calls reachable, or the sampler's first finding, minimized); budgets
are small (states and executions, never seconds), so a status may be "not proven" where the
bench's larger budgets prove it.
"""

from __future__ import annotations

import sys

import pytest

from epfuzz.protocols import ZOO, get_protocol
from epfuzz.protocols.deep import DEEP_ZOO
from epfuzz.repair import repair
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from repair import same_shape, small_case  # noqa: E402

#: bad protocol -> the edit sets equivalent to what its fixed form changes
FIXED_FORM = {
    "deepep_v2_dispatch": {"strict-window"},
    "flag_write_signal": {"strict-window", "atomic-signal", "atomic-signal + strict-window"},
    "inband_tag": {"receiver:checksum"},
    "flush_other_qp": {"signal-on-data-qp"},
    "shared_counter": {"receiver:wait_total"},
    "stale_epoch_counter": {"receiver:epoch_base", "reset-signals"},
    "signal_reset_race": {"ordered-reset"},
    "early_credit_release": {"credit-after-read"},
    "gdr_no_flush": {"flush-on-accept"},
    "geometry_index": {"receiver-slot"},
    "deep_ro_signal": {"strict-window"},
    "deep_remainder_flag": {"atomic-signal"},
    "deep_flag_write": {"atomic-signal"},
    "deep_notify_qp": {"signal-on-data-qp"},
    "deep_other_qp": {"signal-on-data-qp"},
    "deep_imm_other_qp": {"signal-on-data-qp"},
    "deep_gdr": {"flush-on-accept"},
    "deep_reset_race": {"ordered-reset"},
}
PAIRS = [(bad, fixed) for _, _, bad, fixed in (*ZOO, *DEEP_ZOO)]
CAMPAIGN, STATES = 100, 20_000


def test_every_bad_protocol_has_its_fixed_form_named():
    assert set(FIXED_FORM) == {bad for bad, _ in PAIRS}


@pytest.mark.slow
@pytest.mark.parametrize("bad,fixed", PAIRS, ids=[b for b, _ in PAIRS])
def test_repair_proposes_the_fixed_form_and_the_fixed_form_needs_none(bad, fixed):
    found = small_case(bad)
    assert found is not None, bad
    case = found[0]
    proto = get_protocol(bad)
    r = repair(case, proto, max_edits=1, campaign_execs=CAMPAIGN, max_states=STATES)
    if not r.repairs:
        r = repair(case, proto, max_edits=2, campaign_execs=CAMPAIGN, max_states=STATES)
    assert r.finding
    names = {c.names for c in r.repairs}
    proven = {c.names for c in r.repairs if c.proof.status == "proven"}
    assert names & FIXED_FORM[bad] or proven, (bad, names, [c.names for c in r.refuted])
    assert all(c.proof.status != "refuted" for c in r.repairs)
    assert repair(same_shape(case, bad, fixed), get_protocol(fixed), campaign_execs=0,
                  max_states=STATES).nothing_to_repair
