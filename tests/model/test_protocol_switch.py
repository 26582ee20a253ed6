"""`--protocol` names the protocol of raw fuzz bytes; a case that names another protocol is refused, not re-run
under it (new-user trial item 2: `epfuzz replay FOLDER --protocol P` turned a DeepEP regression case into a
clean P run, dropped its `"expect": "finding"` and ended PASS). A campaign's seeds still lend their scenario to
the protocol fuzzed, with its pins applied (issue 18.6)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from epfuzz.campaign.guided import _seeds
from epfuzz.cli.commands import main
from epfuzz.encoding import codec

CASE = "corpus/regressions/deepep661-c2b.json"  # deepep_v2_dispatch, which pins mr_relaxed=True


@pytest.mark.parametrize("cmd", ["run", "explore", "explain", "replay", "repair", "minimize"])
def test_a_case_of_another_protocol_is_refused_in_one_line(cmd, capsys, tmp_path):
    extra = ["-o", str(tmp_path / "min.json")] if cmd == "minimize" else []
    rc = main([cmd, CASE, "--protocol", "deepep_v2_dispatch_fixed", *extra])
    out, err = capsys.readouterr()
    line = (f"{CASE}: the case names protocol 'deepep_v2_dispatch', not the --protocol 'deepep_v2_dispatch_fixed': "
            "--protocol applies only to raw fuzz inputs and to cases of that protocol (leave it out to run the case "
            "as its own protocol, or copy the case and change its \"protocol\" field to run it as another)")
    assert rc == 2, out + err
    assert line in err and "pins" not in err, err
    if cmd == "replay":
        assert out.splitlines()[-1].endswith("FAIL (exit 2)"), out
    else:
        assert err.count("\n") == 1 and "unreachable" not in out and "clean" not in out, out + err


def test_a_case_of_the_protocol_named_runs_as_before(capsys):
    assert main(["run", CASE, "--protocol", "deepep_v2_dispatch"]) == 1
    assert main(["replay", CASE, "--protocol", "deepep_v2_dispatch"]) == 0
    assert "pins" not in capsys.readouterr().err


def test_the_old_protocol_still_finds_it(capsys):
    assert main(["run", CASE]) == 1
    assert "pins" not in capsys.readouterr().err


def test_a_seed_case_of_another_protocol_seeds_a_campaign_under_the_new_pins(tmp_path, capsys):
    shutil.copy(CASE, tmp_path / "seed.json")
    seeds = _seeds(Path(tmp_path), "deepep_v2_dispatch_fixed", "spec")
    assert len(seeds) == 1 and "pins knobs.mr_relaxed=False (was True)" in capsys.readouterr().err
    assert codec.decode(seeds[0], "deepep_v2_dispatch_fixed", "spec").knobs.mr_relaxed is False
