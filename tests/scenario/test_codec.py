"""The IR: bytes and JSON round-trip; bad input names the field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epfuzz.encoding import codec
from epfuzz.infra.errors import InputError, ScenarioError
from epfuzz.ir.presets import PRESETS
from epfuzz.ir.scenario import Overtake, Scenario, iter_leaf_fields
from epfuzz.protocols import REGISTRY

protocols = st.sampled_from(sorted(REGISTRY.items))
presets = st.sampled_from(sorted(PRESETS))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200), protocols, presets)
def test_any_bytes_decode_and_round_trip(data, protocol, preset):
    s = codec.decode(data, protocol, preset)
    assert codec.decode(codec.encode(s), protocol, preset) == s
    assert codec.load_json(s.to_json()) == s


def test_empty_input_is_the_simplest_scenario():
    s = codec.decode(b"", "dispatch_any")
    assert s == Scenario(protocol="dispatch_any")
    assert codec.encode(s) == b""


def test_fixed_fields_consume_no_bytes():
    s = codec.decode(b"\x01" * 64, "dispatch_any")
    free = len(codec.encode(s))
    pinned = len(codec.encode(s.replace(protocol="deepep_v2_dispatch", preset="mlx5-pci-atomic",
                                        signal=Scenario().signal,
                                        knobs=s.knobs.__class__(mr_relaxed=True, atomic_mode=4,
                                                                nic_relaxed_ordering=True))))
    assert pinned < free


def test_fixed_fields_are_applied_by_the_decoder():
    s = codec.decode(b"\xff" * 100, "deepep_v2_dispatch", "mlx5-default")
    assert s.knobs.mr_relaxed is True and s.signal.kind == "faa" and s.knobs.atomic_mode == 0


def test_invalid_json_is_one_clear_error():
    with pytest.raises(ScenarioError, match="invalid JSON"):
        codec.load_json("{nope")


@pytest.mark.parametrize("doc, field", [
    ({"payload": {"num_tokens": 0}}, "payload.num_tokens"),
    ({"payload": {"num_tokens": "3"}}, "payload.num_tokens"),
    ({"chunking": {"mtu": 1000}}, "chunking.mtu"),
    ({"knobs": {"mr_relaxed": 1}}, "knobs.mr_relaxed"),
    ({"topology": {"num_qps": 2, "channel_qp": [2]}}, "topology.channel_qp[0]"),
    ({"signal": {"bogus": 1}}, "signal.bogus"),
    ({"faults": {"spins": [{"channel": 0, "ns": -1}]}}, "faults.spins.ns"),
    ({"protocol": "deepep_v2_dispatch", "knobs": {"mr_relaxed": False}}, "knobs.mr_relaxed"),
    ({"preset": "mlx5-default", "knobs": {"atomic_mode": 4}}, "knobs.atomic_mode"),
])
def test_out_of_range_field_is_named(doc, field):
    doc = {"protocol": "dispatch_any", **doc}
    with pytest.raises(ScenarioError) as e:
        codec.load_dict(doc)
    assert e.value.field == field
    assert "\n" not in str(e.value)


def test_unknown_protocol_and_preset():
    with pytest.raises(InputError, match="unknown protocol"):
        codec.load_dict({"protocol": "nope"})
    with pytest.raises(InputError, match="unknown preset"):
        codec.load_dict({"preset": "nope"})


def test_every_leaf_has_a_docstring():
    for path, spec in iter_leaf_fields():
        assert spec.doc, path


def test_digest_is_stable_and_content_addressed():
    a = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 3}})
    b = codec.load_json(json.dumps(a.to_dict()))
    assert a.digest() == b.digest()
    assert a.digest() != a.with_path("payload.num_tokens", 4).digest()


def test_token_budget_bounds_num_tokens():
    s = {"protocol": "dispatch_any", "chunking": {"mtu": 256}, "payload": {"hidden_bytes": 16384, "epochs": 4,
                                                                           "num_tokens": 64}}
    with pytest.raises(ScenarioError, match="payload.num_tokens"):
        codec.load_dict(s)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=80), protocols, presets)
def test_split_encoding_equals_the_full_encoding(data, other, protocol, preset):
    """A schedule move encodes only its mutant's schedule (`codec.split` once per parent, `encode_split` per
    mutant): the bytes must be the full encoding's, whatever the configuration and the new schedule."""
    s = codec.decode(data, protocol, preset)
    sched = codec.decode(other, protocol, preset).schedule
    cut = codec.split(s)
    assert codec.encode_split(cut, sched) == codec.encode(s.replace(schedule=sched))
    assert codec.encode_split(cut, s.schedule) == codec.encode(s)
    assert codec.encode_split(cut, ()) == codec.encode(s.replace(schedule=()))


def test_split_refuses_a_field_a_later_bound_reads():
    """The tail after the cut is written without the cut field's value: a later bound that reads it (here
    faults.qp_delay_ns's length, from topology.num_qps) would make the tail depend on it, so no split."""
    s = codec.decode(bytes(range(1, 120)), "dispatch_any")
    with pytest.raises(ValueError, match="a bound reads"):
        codec.split(s, "topology")
    with pytest.raises(ValueError, match="no top-level field"):
        codec.split(s, "nope")
    with pytest.raises(ValueError, match="outside"):
        codec.encode_split(codec.split(s), (Overtake(index=1 << 20),))   # as `encode` raises for it
