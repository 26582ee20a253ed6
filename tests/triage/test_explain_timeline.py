"""`epfuzz explain`'s timeline under adaptive routing: a packet the net moved ahead keeps the time of its in-order
arrival (the model orders packets, it does not re-time them), so its line says whom it passed; a user trial read
`t=622 ns packet 1 ... arrives` listed before `t=602 ns packet 0 ... arrives` with nothing to say why."""

from __future__ import annotations

import re

from epfuzz.continuous.seeds import SEED_661
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


def _overwritten():
    """Early credit release: epoch 1's write lands in the slot epoch 0's receiver still reads."""
    name = "early_credit_release"
    scn = codec.load_dict({"protocol": name, "faults": {"rx_lag": 1}, "payload": {"epochs": 2, "num_tokens": 1},
                           "topology": {"num_channels": 1, "num_qps": 1}})
    assert simulate(scn, get_protocol(name)).violation.kind == "overwritten-while-read"
    return scn


def test_an_overwritten_while_read_finding_says_its_kind_and_labels_each_epochs_timeline() -> None:
    """An author's trial: the finding read "accepted ... with 6 bytes not yet landed (corrupt)" like a stale
    accept, nothing printed its kind, and epoch 1's timeline restarted at t=0 with no label."""
    scn = _overwritten()
    lines = explain(scn, get_protocol(scn.protocol)).text().splitlines()
    assert lines[1].startswith("kind: overwritten-while-read: ") and "while the receiver was still reading" in lines[1]
    heads = [ln for ln in lines if re.fullmatch(r"  epoch \d+ \(times from the epoch's start\)", ln)]
    assert heads == ["  epoch 0 (times from the epoch's start)", "  epoch 1 (times from the epoch's start)"]
    # within each epoch the posts come before that epoch's packets, whose times count from its start
    epoch1 = lines[lines.index(heads[1]) + 1]
    assert re.match(r"  t=\s+0 ns  channel 0 posts WR", epoch1), lines
    hit = [ln for ln in lines if "<== lands in" in ln]
    assert len(hit) == 1 and "while the receiver still reads what it accepted in epoch 0" in hit[0], lines
    assert lines.index("    epoch 1") < lines.index(hit[0])
    assert any(ln.startswith("overwritten bytes: ") for ln in lines)


def test_run_prints_the_finding_kind(tmp_path, capsys) -> None:
    from epfuzz.cli.commands import main

    path = tmp_path / "s.json"
    path.write_text(_overwritten().to_json())
    assert main(["run", str(path)]) == 1
    out = capsys.readouterr().out
    assert "\n  kind: overwritten-while-read: the receiver accepted a range whose bytes had all landed" in out, out


def test_a_zero_length_write_with_imm_is_shown_with_no_data() -> None:
    """An author's trial: a WRITE_WITH_IMM of no data was shown as "data bytes 0-0", one byte written.
    (write_imm_signal's own signal is such a packet; its default scenario is clean, so the timeline is
    read directly: explain's is made by the same function.)"""
    from epfuzz.triage.explain import _timeline

    run = simulate(codec.load_dict({"protocol": "write_imm_signal"}), get_protocol("write_imm_signal"))
    assert any(p.length == 0 for p in run.packets)
    imm = [ln for ln in _timeline(run, 0) if " WRITE_WITH_IMM " in ln]
    assert imm and all(ln.split("WRITE_WITH_IMM ")[1].startswith("with no data (zero-length) arrives") for ln in imm)


def test_an_overwritten_while_read_summary_does_not_say_not_yet_landed() -> None:
    """Its bytes had all landed; a later epoch overwrote them while they were read. The summary said "with N
    bytes not yet landed" as a stale accept's does (fixers' leftover); a stale accept's still does."""
    scn = _overwritten()
    v = simulate(scn, get_protocol(scn.protocol)).violation
    text = v.summary()
    assert "not yet landed" not in text and f"then {v.bad_bytes} bytes of it overwritten by a later epoch" in text
    stale = simulate(codec.load_dict(SEED_661), get_protocol("deepep_v2_dispatch")).violation
    assert stale.kind == "stale-accept" and "bytes not yet landed" in stale.summary()


def test_the_plot_titles_a_finding_with_no_overtake_and_colours_packets_by_what_they_carry():
    """New-user trial item 8: a finding that needs no overtake was titled "proto:" and nothing, and a flag sent
    by a plain RDMA WRITE was drawn in the data packets' blue (packets were coloured atomic or not)."""
    from epfuzz.encoding import codec
    from epfuzz.protocols import get_protocol
    from epfuzz.sim.engine import simulate
    from epfuzz.triage.explain import explain
    from epfuzz.triage.plot import packet_style, title_of

    cross = codec.load_dict({"protocol": "dispatch_any", "topology": {"num_qps": 2},
                             "signal": {"kind": "faa", "other_qp": True}, "faults": {"qp_delay_ns": [20000]}})
    exp = explain(cross, get_protocol(cross.protocol))
    assert exp.overtakes == []
    assert title_of(exp) == "dispatch_any: no overtake: arrival order alone exposes it (timing across QPs)"
    assert {packet_style(p)[0] for p in exp.run.packets} == {"data packet", "atomic signal packet"}
    flag = codec.load_dict({"protocol": "flag_write_signal"})
    run = simulate(flag, get_protocol(flag.protocol))
    assert {(p.region == "data", packet_style(p)[0]) for p in run.packets} == {(True, "data packet"),
                                                                              (False, "signal packet")}
