"""The plug-in pre-flight is one check, run once, whoever starts the campaign.

It was two: the CLI ran a hang check (epfuzz.cli.preflight) and then the campaign ran its own load-and-run
(then epfuzz.campaign.common.preflight), so `epfuzz fuzz --protocol` ran the plug-in twice on the simplest
scenario, and a campaign started from Python (`fuzz_guided`, `fuzz`) never got the hang check: a receiver
that never completes, with nothing reordered, made every input a hang finding and a false alarm."""

from __future__ import annotations

from pathlib import Path

import pytest

from epfuzz.backends import get_backend
from epfuzz.cli.commands import main as cli
from epfuzz.infra.errors import ProtocolError
from epfuzz.protocols import REGISTRY
from tests.zoo.never_done import NeverDone

SPEC = "tests.cli.test_preflight_once:NeverDone"
HANGS = "hangs on the simplest scenario, where nothing is reordered"


@pytest.fixture
def never_done():
    REGISTRY.loaded[SPEC] = NeverDone()
    try:
        yield SPEC
    finally:
        del REGISTRY.loaded[SPEC]


def test_the_guided_campaign_from_python_refuses_a_receiver_that_hangs_in_order(tmp_path, never_done):
    from epfuzz.campaign.guided import fuzz_guided

    with pytest.raises(ProtocolError, match=HANGS):
        fuzz_guided(None, 600, protocol=never_done, run_dir=tmp_path / "r", max_execs=30, progress=False)
    assert not (tmp_path / "r").exists()


def test_the_libfuzzer_campaign_from_python_refuses_a_receiver_that_hangs_in_order(tmp_path, never_done):
    from epfuzz.campaign.libfuzzer import fuzz

    with pytest.raises(ProtocolError, match=HANGS):
        fuzz(None, 2, protocol=never_done, run_dir=tmp_path / "r", extra=["-runs=10"], progress=False)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("engine", ["guided", "libfuzzer"])
def test_fuzz_runs_the_plugin_once_before_the_campaign(tmp_path, monkeypatch, engine):
    """The run stops at the run folder (not empty), which comes after the pre-flight in every engine:
    what ran by then is the pre-flight alone."""
    sim = type(get_backend("sim"))
    real = sim.run
    runs: list[str] = []

    def counted(self, scn, proto, repeats=1):
        runs.append(scn.protocol)
        return real(self, scn, proto, repeats)

    monkeypatch.setattr(sim, "run", counted)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "old.json").write_text("{}")
    spec = "examples.seqflag:SeqFlag"
    assert cli(["fuzz", "--protocol", spec, "--engine", engine, "--time", "30", "--run-dir", str(taken)]) == 2
    assert runs == [spec]
    assert [p.name for p in Path(taken).iterdir()] == ["old.json"]
