"""Issue 18.8: `expect` may depend on the scenario; the plug-in's own name is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epfuzz.cli.commands import main
from epfuzz.infra.errors import ProtocolError
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from examples.seqflag import SeqFlag

CASE = json.loads(Path("corpus/regressions/deepep661-c2b.json").read_text())["scenario"]


class ByPreset(SeqFlag):
    name = "seqflag_by_preset"
    expect = {"mlx5-pci-atomic": "finding", "*": "clean"}


class ByCallable(SeqFlag):
    name = "seqflag_by_callable"

    @staticmethod
    def expect(scn: Scenario) -> str:  # type: ignore[override]
        return "finding" if scn.knobs.mr_relaxed else "clean"


class Broken(SeqFlag):
    name = "seqflag_broken"
    expect = {"spec": "finding"}


BY_PRESET, BY_CALLABLE, BROKEN = ByPreset(), ByCallable(), Broken()


def _scn(**knobs) -> Scenario:
    from epfuzz.encoding import codec
    d = json.loads(json.dumps(CASE))
    d["protocol"] = "examples.seqflag:SeqFlag"
    d["knobs"].update(knobs)
    return codec.load_dict(d)


def test_plain_string_expect_still_works():
    assert SeqFlag().expected(_scn()) == "finding" and SeqFlag().expected() == "finding"
    assert isinstance(Protocol.expect, str)


def test_expect_by_preset_and_by_callable():
    scn = _scn()
    assert BY_PRESET.expected(scn) == "finding"
    assert BY_PRESET.expected(scn.replace(preset="spec")) == "clean"
    assert BY_PRESET.expected() == ""  # no single promise
    assert BY_CALLABLE.expected(scn) == "finding"
    assert BY_CALLABLE.expected(scn.with_path("knobs.mr_relaxed", False)) == "clean"
    with pytest.raises(ProtocolError, match="seqflag_broken"):
        BROKEN.expected(scn)


def test_replay_uses_the_scenario_dependent_promise(tmp_path, capsys):
    d = json.loads(json.dumps(CASE))
    d["protocol"] = "tests.model.test_plugin_expect:BY_PRESET"
    f = tmp_path / "bare.json"
    f.write_text(json.dumps(d))
    rc = main(["replay", "--strict", str(f)])
    out = capsys.readouterr().out
    assert rc == 0 and "1 as expected" in out, out


def test_run_shows_the_plugins_own_name(tmp_path, capsys):
    raw = tmp_path / "input"  # raw bytes: a case names its own protocol, which --protocol may not change
    raw.write_bytes(bytes.fromhex(json.loads(Path("corpus/regressions/deepep661-c2b.json").read_text())["input"]))
    main(["run", str(raw), "--protocol", "examples.seqflag:SeqFlag"])
    out = capsys.readouterr().out
    assert "protocol examples.seqflag:SeqFlag ('seqflag')" in out.splitlines()[0], out


class StarClean(SeqFlag):
    name, expect = "seqflag_star_clean", {"*": "clean"}


class WordClean(SeqFlag):
    name, expect = "seqflag_word_clean", "clean"


def test_under_nvlink_a_word_clean_is_refined_and_a_mapping_is_taken_as_written():
    """docs/plugins.md (`expect`): a plain "clean" promises nothing under nvlink for a scenario whose signal is no
    ordering point (platform_expect.refine); {"*": "clean"} promises clean there too (an author's trial, L1)."""
    unfenced = _scn().replace(preset="nvlink").with_path("gpu.fence", "none")
    fenced = unfenced.with_path("gpu.fence", "threadfence_system")
    assert WordClean().expected(unfenced) == "" and WordClean().expected(fenced) == "clean"
    assert StarClean().expected(unfenced) == "clean" and StarClean().expected(fenced) == "clean"
    assert WordClean().expected(unfenced.replace(preset="spec")) == "clean"
