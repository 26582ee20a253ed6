"""Issue 18.6: `--protocol` on a JSON case applies the new protocol's pins and says so."""

from __future__ import annotations

import pytest

from epfuzz.cli.commands import main

CASE = "corpus/regressions/deepep661-c2b.json"  # deepep_v2_dispatch, which pins mr_relaxed=True


@pytest.mark.parametrize("cmd", ["run", "explore", "explain", "replay"])
def test_protocol_switch_applies_the_new_pins(cmd, capsys):
    rc = main([cmd, CASE, "--protocol", "deepep_v2_dispatch_fixed"])
    out, err = capsys.readouterr()
    assert "pins knobs.mr_relaxed=False (was True)" in err, err
    if cmd == "explain":  # before the fix it explained the fixed protocol's "finding"
        assert rc == 2 and "clean on sim: nothing to explain" in err, out + err
    elif cmd == "explore":
        assert rc == 0 and any(line.startswith("unreachable") for line in out.splitlines()), out
    else:
        assert rc == 0 and "finding" not in out.splitlines()[0], out


def test_the_old_protocol_still_finds_it(capsys):
    assert main(["run", CASE]) == 1
    assert "pins" not in capsys.readouterr().err
