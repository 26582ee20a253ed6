"""The plug-in pre-flight checks (epfuzz.protocols.preflight, epfuzz.campaign.preflight) refuse
nothing epfuzz ships: every built-in protocol and the examples complete the simplest scenario on every
preset, and their pins and signature knobs are scenario fields.
A check that tripped one of them would stop `epfuzz fuzz --protocol NAME`."""

from __future__ import annotations

import pytest

from epfuzz.campaign.preflight import preflight
from epfuzz.infra.errors import InputError, ProtocolError
from epfuzz.ir.presets import PRESETS
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.protocols.preflight import expect_rule, fields
from tests.zoo.never_done import NeverDone

EXAMPLES = ("examples.seqflag:SeqFlag", "examples.seqflag:SeqFlagAtomic")


@pytest.mark.parametrize("name", [*BUILTIN, *EXAMPLES])
def test_no_shipped_protocol_trips_the_preflight_checks(name):
    proto = get_protocol(name)
    fields(proto, name)
    expect_rule(proto, name)
    for preset in PRESETS:
        preflight(name, preset)


def test_a_receiver_that_never_completes_in_order_is_refused_by_the_preflight():
    from epfuzz.protocols import REGISTRY

    proto = NeverDone()
    REGISTRY.loaded["tests.zoo.test_preflight:NeverDone"] = proto
    try:
        with pytest.raises(ProtocolError, match="hangs on the simplest scenario, where nothing is reordered"):
            preflight("tests.zoo.test_preflight:NeverDone", "spec")
    finally:
        del REGISTRY.loaded["tests.zoo.test_preflight:NeverDone"]


@pytest.mark.parametrize(("attr", "value", "says"), [
    ("signature_knobs", ("payload.num_epochs",), "lists in signature_knobs 'payload.num_epochs', which is no "
                                                  "scenario field; did you mean payload.epochs?"),
    ("signature_knobs", "payload.epochs", "signature_knobs is 'payload.epochs', not a tuple"),
    ("fixed", {"knobs.mr_relaxd": True}, "pins 'knobs.mr_relaxd', which is no scenario field; did you mean "
                                         "knobs.mr_relaxed?"),
])
def test_fields_names_a_misspelt_pin_or_signature_knob(attr, value, says):
    proto = NeverDone()
    setattr(proto, attr, value)
    with pytest.raises(InputError, match=says.replace("?", r"\?").replace("(", r"\(")):
        fields(proto, "mine:P")


@pytest.mark.parametrize(("expect", "says"), [
    # the trial's typo.py: the misspelt key surfaced only at the first finding, as "expect gives None"
    ({"spec": "finding", "mlx5-pci-atomics": "finding"}, "expect names preset 'mlx5-pci-atomics', which is no "
                                                         "preset; did you mean mlx5-pci-atomic?"),
    ({"*": "clen"}, "expect gives 'clen', not \"finding\" or \"clean\""),
    ("findings", "expect gives 'findings', not"),
])
def test_expect_rule_names_a_misspelt_preset_or_verdict_with_the_class_and_its_file(expect, says):
    proto = NeverDone()
    proto.expect = expect
    with pytest.raises(InputError) as err:
        expect_rule(proto, "mine:P")
    line = str(err.value)
    assert says in line and "\n" not in line
    assert "never_done.py, class NeverDone" in line


@pytest.mark.parametrize("expect", ["clean", {"spec": "finding", "nvlink": "finding", "*": "clean"},
                                    {"mlx5-ro-only": "finding"}, lambda scn: "clean"])
def test_expect_rule_takes_a_verdict_a_mapping_of_presets_or_a_callable(expect):
    proto = NeverDone()
    proto.expect = expect
    expect_rule(proto, "mine:P")
