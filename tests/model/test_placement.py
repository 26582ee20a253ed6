"""Issue 18.1: where SEND / WRITE_WITH_IMM land, and ops that address outside the layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epfuzz.cli.commands import main
from epfuzz.encoding import codec
from epfuzz.infra.errors import ProtocolError
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol
from epfuzz.protocols.base import Consume, Protocol, Receiver
from epfuzz.sim.engine import simulate


def _send_scenario(channels: int) -> dict:
    base = json.loads(Path("corpus/regressions/cross-qp-no-ro.json").read_text())["scenario"]
    base.update(protocol="dispatch_any", preset="no-ro", schedule=[])
    base["knobs"].update(mr_relaxed=False, nic_relaxed_ordering=False, adaptive_routing=False)
    base["signal"].update(kind="send", other_qp=False, fence=False)
    base["topology"].update(num_channels=channels, num_qps=1, channel_qp=[])
    base["payload"].update(num_tokens=2, epochs=1)
    base["faults"].update(qp_delay_ns=[], spins=[])
    return base


@pytest.mark.parametrize("channels", [1, 2, 3])
def test_send_signal_with_several_channels_is_clean(channels):
    scn = codec.load_dict(_send_scenario(channels))
    run = simulate(scn, get_protocol("dispatch_any"))
    assert run.violation is None, run.violation.summary()


def test_send_message_lands_in_the_posting_channels_recv_entry():
    scn = codec.load_dict(_send_scenario(2))
    run = simulate(scn, get_protocol("dispatch_any"))
    lay = run.layout
    sends = [t for t in run.tlps if t.region == ops.RECV]
    cqes = [t for t in run.tlps if t.region == ops.CQ]
    assert sends and len(sends) == len(cqes)
    chans = {p.seq: p.channel for p in run.packets}
    for t in sends + cqes:
        slot = next(p.cq_slot for p in run.packets if p.seq == t.pkt)
        assert t.off == (chans[t.pkt] * lay.max_signals + slot) * 16


class _Bad(Protocol):
    """A WRITE_WITH_IMM whose CQ entry is past the layout's `max_signals`."""

    name = "bad_cq_slot"

    def sender(self, scn, layout, epoch):
        return [[ops.WriteImm(0, ops.DATA, layout.slot_offset(c, 0), 16, 1, layout.max_signals + c)]
                for c in range(layout.num_channels)]

    def receiver(self, scn, layout):
        return _Never()


class _Never(Receiver):
    watch = frozenset({ops.CQ})

    def start_epoch(self, epoch):
        pass

    def poll(self, mem, epoch) -> list[Consume]:
        return []

    def done(self):
        return True

    def state(self):
        return ()

    def restore(self, state):
        pass


class _OutOfData(_Bad):
    name = "bad_write"

    def sender(self, scn, layout, epoch):
        return [[ops.Write(0, ops.DATA, layout.sizes[ops.DATA] - 8, 16)]]


@pytest.mark.parametrize("proto,what", [(_Bad(), "WriteImm"), (_OutOfData(), "Write")])
def test_an_op_outside_the_layout_is_a_protocol_error_naming_it(proto, what):
    scn = codec.load_dict(_send_scenario(2))
    with pytest.raises(ProtocolError, match=what):
        simulate(scn, proto)


def test_cli_exits_3_on_a_protocol_error(tmp_path, monkeypatch, capsys):
    mod = tmp_path / "badproto.py"
    mod.write_text("from tests.model.test_placement import _Bad\nBAD = _Bad()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    case = tmp_path / "case.json"
    d = _send_scenario(2)
    d["protocol"] = "badproto:BAD"
    case.write_text(json.dumps(d))
    rc = main(["run", str(case), "--allow-plugins", str(tmp_path)])  # a case names a plug-in: allowed
    err = capsys.readouterr().err
    assert rc == 3 and "protocol error" in err and "WriteImm" in err, err
