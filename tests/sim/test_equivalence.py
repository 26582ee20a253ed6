"""The emulator still does exactly what it did when the reference was written (issue 14's speed work).

`bench/equivalence.py` documents the reference and how to regenerate it after a deliberate model change.
"""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import equivalence  # noqa: E402


def _check(limit: int) -> None:
    n, bad = equivalence.mismatches(limit)
    assert n == limit
    assert not bad, f"{len(bad)} of {n} scenarios differ from the reference, first: {bad[:3]}"


def test_first_2000_scenarios_match_reference() -> None:
    _check(2000)


@pytest.mark.slow
def test_all_10000_scenarios_match_reference() -> None:
    _check(equivalence.COUNT)


def test_every_builtin_protocol_has_rows() -> None:
    """A protocol registered after the reference was written adds rows (`bench/equivalence.py --add`)."""
    from epfuzz.protocols import BUILTIN

    assert set(BUILTIN) <= {row[1] for row in equivalence.load()}


def test_added_protocols_rows_match_reference() -> None:
    """Every row appended for a protocol added after the first COUNT (issue 30)."""
    ref = equivalence.load()
    names = sorted({row[1] for row in ref[equivalence.COUNT:]})
    n, bad = equivalence.mismatches(None, start=equivalence.COUNT)
    assert n == len(ref) - equivalence.COUNT and not bad, bad[:3]
    assert names


def test_reference_detects_a_changed_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model change that alters only the trace (not the verdict) must be caught."""
    from epfuzz.sim import engine

    real = engine.SimRun.fingerprint
    monkeypatch.setattr(engine.SimRun, "fingerprint", lambda self: (*real(self)[:-1], "changed"))
    _, bad = equivalence.mismatches(5)
    assert len(bad) == 5
