"""What a NIC's memory keys allow (epfuzz.model.device): one test per `DEVICE_CLAUSES` entry, at the rule and
through the responder (the TLPs' RO bit) on the `mlx5-ro-only` preset."""

from __future__ import annotations

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.ir.presets import PRESETS
from epfuzz.model.device import DEVICE_CLAUSES, RO_ONLY_MODEL, mr_relaxed, tlp_ro
from epfuzz.model.ordering import TlpType
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore

TESTED = {"MR-strict", "RO-only-key", "WQE-strong-order"}


def _tlps(name: str, preset: str) -> dict[TlpType, set[bool]]:
    """The RO bits of each TLP class of a run of `name` (two tokens, one channel)."""
    scn = codec.load_dict({"protocol": name, "preset": preset, "payload": {"num_tokens": 2}})
    out: dict[TlpType, set[bool]] = {}
    for t in simulate(scn, get_protocol(name)).tlps:
        if not t.local:
            out.setdefault(t.attrs.type, set()).add(t.attrs.ro)
    return out


def test_every_clause_is_tested_here():
    assert set(DEVICE_CLAUSES) == TESTED
    assert PRESETS["mlx5-ro-only"].model == RO_ONLY_MODEL
    for c in DEVICE_CLAUSES.values():
        assert c.source and c.rule


def test_mr_strict_a_strict_request_is_honoured_where_keys_can_be_strict():
    assert mr_relaxed(False, ro_only=False) == (False, "MR-strict")
    assert mr_relaxed(True, ro_only=False) == (True, "")
    # the same protocol on a PCI-atomic mlx5 with strict keys: no TLP carries RO (the NIC sets RO, the MR says no)
    assert _tlps("ro_only_strict_mr", "mlx5-pci-atomic") == {TlpType.POSTED: {False}, TlpType.NP_DATA: {False}}


def test_ro_only_key_a_strict_request_is_registered_relaxed():
    assert mr_relaxed(False, ro_only=True) == (True, "RO-only-key")
    assert tlp_ro(True, True, strong=False) and not tlp_ro(True, False, strong=False)
    assert _tlps("ro_only_strict_mr", "mlx5-ro-only") == {TlpType.POSTED: {True}, TlpType.NP_DATA: {True}}
    scn = codec.load_dict({"protocol": "ro_only_strict_mr", "preset": "mlx5-ro-only", "payload": {"num_tokens": 2},
                           "knobs": {"reorder_window": 4}})
    found = explore(scn, get_protocol("ro_only_strict_mr")).violation
    assert found is not None and found.kind == "stale-accept"


def test_wqe_strong_order_a_strongly_ordered_wqe_is_placed_without_ro():
    assert not tlp_ro(True, True, strong=True)
    assert _tlps("ro_only_strict_mr_fixed", "mlx5-ro-only") == {TlpType.POSTED: {True}, TlpType.NP_DATA: {False}}
    scn = codec.load_dict({"protocol": "ro_only_strict_mr_fixed", "preset": "mlx5-ro-only",
                           "payload": {"num_tokens": 3}, "knobs": {"reorder_window": 4}})
    assert explore(scn, get_protocol("ro_only_strict_mr_fixed")).violation is None
    assert ops.AtomicAdd(0, ops.SIGNAL, 0, 1, strong=True).strong and not ops.WriteValue(0, ops.SIGNAL, 0, 1).strong
