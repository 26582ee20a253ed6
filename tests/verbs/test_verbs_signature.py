"""A verbs finding's signature names only what the runner applies: NIC firmware knobs do not split a bug.

The verbs runner posts the protocol's ops and registers the MR (relaxed or not); it cannot set PCI
atomic mode, NIC relaxed ordering, o9-20, adaptive routing or IDO, so two findings that differ only
there are the same run on the device, and one bug."""

from __future__ import annotations

from epfuzz.backends import Outcome, get_backend
from epfuzz.backends.verbs import DEVICE_KNOBS
from epfuzz.encoding import codec
from epfuzz.model.oracle import Violation
from epfuzz.protocols import get_protocol
from epfuzz.triage.findings import signature


def _finding(**knobs: object) -> str:
    scn = codec.decode(b"", "dispatch_any", "spec")
    for k, value in knobs.items():
        scn = scn.with_path(f"knobs.{k}", value)
    v = Violation("stale-accept", "dispatch_any", 0, 0, "accepted slot 0 with 8 bytes not yet landed")
    return signature(scn, Outcome("verbs", v, runs=1, hits=1), get_protocol("dispatch_any"))


def test_device_knobs_do_not_split_a_verbs_bug_and_the_runners_own_fields_do():
    fields = get_backend("verbs", require=False).signature_fields(get_protocol("dispatch_any"))
    assert not DEVICE_KNOBS & set(fields)
    assert {"signal.kind", "signal.other_qp", "signal.fence", "knobs.mr_relaxed"} <= set(fields)
    assert _finding(atomic_mode=4, ido=True) == _finding(atomic_mode=0, ido=False)
    assert _finding(mr_relaxed=True) != _finding(mr_relaxed=False)
