"""`epfuzz explain`'s timeline under adaptive routing: a packet the net moved ahead keeps the time of its in-order
arrival (the model orders packets, it does not re-time them), so its line says whom it passed; a user trial read
`t=622 ns packet 1 ... arrives` listed before `t=602 ns packet 0 ... arrives` with nothing to say why."""

from __future__ import annotations

import re

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Overtake
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.triage.explain import explain

ANY = get_protocol("dispatch_any")


def _ar_finding():
    """A flag written behind its data on one QP, moved ahead of the data by a net overtake."""
    base = codec.load_dict({"protocol": "dispatch_any", "preset": "spec",
                            "knobs": {"adaptive_routing": True, "mr_relaxed": False, "nic_relaxed_ordering": False},
                            "signal": {"kind": "write"}, "payload": {"num_tokens": 1, "epochs": 1},
                            "topology": {"num_channels": 1, "num_qps": 1}})
    for i in range(8):
        scn = base.replace(schedule=(Overtake("net", i, 4),))
        run = simulate(scn, ANY)
        if run.violation is not None and run.packet_inversions:
            return scn
    raise AssertionError("no net overtake of this shape gives a finding")


def test_a_packet_moved_ahead_says_whom_it_passed_and_times_read_in_order() -> None:
    scn = _ar_finding()
    text = explain(scn, ANY).text()
    lines = [ln for ln in text.splitlines() if re.match(r"\s+(t=\s*\d+ ns|ahead \(AR\))\s+packet ", ln)]
    moved = [ln for ln in lines if "ahead (AR)" in ln]
    assert moved and all("by adaptive routing (in order it would arrive at t=" in ln for ln in moved), text
    assert all(re.search(r"arrives ahead of packets? \d+", ln) for ln in moved), text
    # the lines that do show a time show them in order: no arrival listed before an earlier one unexplained
    times = [int(m.group(1)) for ln in lines if (m := re.match(r"\s+t=\s*(\d+) ns", ln))]
    assert times == sorted(times), text
