"""`expect` per preset (issue 29.7): a PCIe-fixed protocol promises nothing under nvlink for a
scenario whose GPU signal orders nothing, so its findings there are true, never "FALSE ALARM";
with a system-scope fence the promise holds (checked here on sampled inputs)."""

from __future__ import annotations

import random

import pytest

from epfuzz.backends import get_backend
from epfuzz.campaign.common import Summary, false_alarms
from epfuzz.continuous.harness import Harness
from epfuzz.encoding import codec
from epfuzz.protocols import REGISTRY, ZOO, load_plugin
from epfuzz.triage.findings import write_finding

FIXED = [row.fixed for row in ZOO] + ["write_imm_signal"]
SIM = get_backend("sim")


def _with_gpu(scn, **gpu):
    d = scn.to_dict()
    return codec.load_dict({**d, "gpu": {**d["gpu"], **gpu}})


def _inputs(n: int, seed: int = 29) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(256) for _ in range(n)]


@pytest.mark.parametrize("name", FIXED)
def test_a_fixed_form_promises_clean_under_nvlink_only_when_its_signal_is_fenced(name):
    proto = REGISTRY.items[name]
    base = codec.decode(b"", name, "nvlink")
    fenced = _with_gpu(base, fence="threadfence_system")
    assert proto.expected(fenced) == "clean"
    assert proto.expected(codec.decode(b"", name, "spec")) == "clean"
    if name != "inband_tag_fixed":  # a checksum needs no ordering: clean on any transport
        assert proto.expected(_with_gpu(base, fence="none", store="plain")) == ""


@pytest.mark.parametrize("name", FIXED)
def test_the_fenced_promise_is_true_on_sampled_inputs(name):
    proto = REGISTRY.items[name]
    for data in _inputs(60):
        scn = _with_gpu(codec.decode(data, name, "nvlink"), fence="threadfence_system")
        assert SIM.run(scn, proto).violation is None, scn.to_json()


def _unfenced_finding(name: str):
    proto = REGISTRY.items[name]
    for data in _inputs(400, seed=7):
        scn = codec.decode(data, name, "nvlink")
        if proto.expected(scn) == "" and SIM.run(scn, proto).violation is not None:
            return data
    pytest.fail(f"no unfenced nvlink finding of {name} in 400 sampled inputs")


def test_an_unfenced_nvlink_finding_of_a_fixed_form_is_no_false_alarm(tmp_path, capsys):
    data = _unfenced_finding("deepep_v2_dispatch_fixed")
    h = Harness("deepep_v2_dispatch_fixed", preset="nvlink", keep_going=True, findings_dir=tmp_path)
    h.test_one_input(data)
    err = capsys.readouterr().err
    assert "=== epfuzz finding" in err and "FALSE ALARM" not in err, err
    assert false_alarms(sorted(tmp_path.glob("finding-*.json"))) == []


def test_a_broken_promise_is_said_in_the_summary(tmp_path):
    """A plug-in that promises clean and is not: the summary names it (it was silent)."""
    proto = load_plugin("examples.seqflag:SeqFlag")
    liar = type("Liar", (type(proto),), {"expect": "clean", "name": "liar"})()
    REGISTRY.items["tests.liar:Liar"] = liar
    try:
        for data in _inputs(300, seed=3):
            scn = codec.decode(data, "tests.liar:Liar", "spec")
            out = SIM.run(scn, liar)
            if out.violation is not None:
                path = write_finding(tmp_path, scn, data, out, liar)
                break
        else:
            pytest.fail("SeqFlag gave no finding in 300 sampled inputs")
        alarms = false_alarms([path])
        assert alarms == [path]
        text = Summary("liar_fuzzer", tmp_path, 1.0, 1, 0, 0, 0, [("s", path, "")], false_alarms=alarms).render()
        assert "promises clean" in text and str(path) in text
    finally:
        REGISTRY.items.pop("tests.liar:Liar", None)
