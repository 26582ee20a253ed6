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
from epfuzz.protocols.preflight import fields
from tests.zoo.never_done import NeverDone

EXAMPLES = ("examples.seqflag:SeqFlag", "examples.seqflag:SeqFlagAtomic")


@pytest.mark.parametrize("name", [*BUILTIN, *EXAMPLES])
def test_no_shipped_protocol_trips_the_preflight_checks(name):
    proto = get_protocol(name)
    fields(proto, name)
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
