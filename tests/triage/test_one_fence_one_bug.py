"""One missing fence is one bug, whether the root complex or adaptive routing reordered it.

A pip user's plug-in (trial 2026-12-05, ReadNoFenceAtomicRO) posted a data WRITE, an RDMA READ of its
last bytes and the tail's fetch-and-add without IBV_SEND_FENCE: one mistake, two rows in the bug table,
`C2b+IB-read-unfenced` (33 findings) and `AR+C2b` (1). The second row's case had been minimized with its
PCIe overtake still pointing at the TLP order adaptive routing made, so turning AR off failed, and the knob
pass then shrank `knobs.reorder_window` to 1, where only AR can move the atomic past the READ. The
minimizer now trades AR for the root complex (`epfuzz.triage.trade`) where the root complex can move the
same WR past the same WR. The protocols here have the trial's shape, not its file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epfuzz.backends import get_backend
from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import REGISTRY
from epfuzz.protocols.base import Consume, Protocol, Receiver
from epfuzz.triage.findings import write_finding
from epfuzz.triage.group import group

ONE, TWO = "test_read_nofence_atomic", "test_two_missing_fences"


class TailReceiver(Receiver):
    """Accepts each channel's slots below its tail (the signal word at channel * 8)."""

    watch = frozenset({ops.SIGNAL})

    def __init__(self, layout):
        self.layout, self.seen = layout, [0] * layout.num_channels

    def start_epoch(self, epoch):
        self.seen = [0] * self.layout.num_channels

    def poll(self, mem, epoch):
        out = []
        for c in range(self.layout.num_channels):
            tail = min(mem.u64(ops.SIGNAL, c * 8), self.layout.tokens_in_channel[c])
            if tail > self.seen[c]:
                out.append(Consume(ops.DATA, self.layout.slot_offset(c, self.seen[c]),
                                   (tail - self.seen[c]) * self.layout.token_bytes, c, f"channel {c}"))
                self.seen[c] = tail
        return out

    def done(self):
        return all(s >= n for s, n in zip(self.seen, self.layout.tokens_in_channel))

    def state(self):
        return tuple(self.seen)

    def restore(self, state):
        self.seen = list(state)


class ReadNoFenceAtomic(Protocol):
    """Per token: the data WRITE, a READ of its last 8 bytes, then the tail's +1, all on the data QP, the
    +1 without the fence (the fix: `fence=True`, after which the atomic waits for the READ's response)."""

    name, expect = ONE, "finding"
    fixed = {"knobs.mr_relaxed": True}
    flag_channels: frozenset[int] = frozenset()

    def sender(self, scn, layout, epoch):
        progs = []
        for c in range(layout.num_channels):
            q, prog = scn.qp_of_channel(c), []
            for s in range(layout.tokens_in_channel[c]):
                off = layout.slot_offset(c, s)
                prog.append(ops.Write(q, ops.DATA, off, layout.token_bytes))
                if c in self.flag_channels:  # a second mistake: a fenced flag WRITE (the fence waits for no WRITE)
                    prog.append(ops.WriteValue(q, ops.SIGNAL, c * 8, s + 1, fence=True))
                else:
                    prog += [ops.Read(q, ops.DATA, off + layout.token_bytes - 8, 8),
                             ops.AtomicAdd(q, ops.SIGNAL, c * 8, 1)]
            progs.append(prog)
        return progs

    def receiver(self, scn, layout):
        return TailReceiver(layout)


class TwoMissingFences(ReadNoFenceAtomic):
    """Channel 0 as above; channel 1 signals with a fenced flag WRITE, which RO lets pass its data (A2b)."""

    name = TWO
    flag_channels = frozenset({1})


@pytest.fixture(autouse=True)
def registered():
    REGISTRY.add(ReadNoFenceAtomic())
    REGISTRY.add(TwoMissingFences())
    yield
    REGISTRY.items.pop(ONE)
    REGISTRY.items.pop(TWO)


SHAPE = {"num_tokens": 1, "hidden_bytes": 16, "scale_bytes": 0, "meta_bytes": 16, "epochs": 1}
RO = {"nic_relaxed_ordering": True, "atomic_mode": 4}
ONE_QP = {"num_channels": 1, "num_qps": 1}


def _move(stage: str, index: int, distance: int) -> dict:
    return {"stage": stage, "index": index, "distance": distance}


#: the READ-then-unfenced-atomic race three ways: the root complex alone (window 2), and adaptive routing
#: moving the atomic's packet past the READ's, at window 1 (the case main's minimizer ended at: its second
#: row) and at window 16 with an overtake that names the atomic in the order adaptive routing made
FENCE = [
    {"knobs": {**RO, "reorder_window": 2}, "topology": ONE_QP, "schedule": [_move("pcie", 2, 2)]},
    {"knobs": {**RO, "adaptive_routing": True, "reorder_window": 1}, "topology": ONE_QP,
     "schedule": [_move("net", 2, 1), _move("pcie", 1, 1)]},
    {"knobs": {**RO, "adaptive_routing": True, "reorder_window": 16}, "topology": ONE_QP,
     "schedule": [_move("net", 2, 5), _move("pcie", 1, 10)]},
]
TWO_CHANNELS = {"num_channels": 2, "num_qps": 2}
#: channel 1's flag passing its data: at the root complex (A2b), and on the wire (AR) with the NIC's RO on
FLAG = [
    {"knobs": {**RO, "reorder_window": 1}, "topology": TWO_CHANNELS, "schedule": [_move("pcie", 3, 2)],
     "payload": {**SHAPE, "num_tokens": 2}},
    {"knobs": {**RO, "adaptive_routing": True}, "topology": TWO_CHANNELS, "schedule": [_move("net", 3, 2)],
     "payload": {**SHAPE, "num_tokens": 2}},
]


def _raw(folder: Path, name: str, docs: list[dict]) -> list[Path]:
    folder.mkdir(exist_ok=True)
    proto, out = REGISTRY.get(name), []
    for doc in docs:
        scn = codec.load_dict({"protocol": name, "payload": SHAPE, **doc})
        got = get_backend("sim").run(scn, proto)
        assert got.violation is not None, doc
        out.append(write_finding(folder, scn, codec.encode(scn), got, proto))
    assert len(set(out)) == len(docs)   # each its own raw signature, as a campaign writes them
    return sorted(out)


def test_one_missing_fence_is_one_bug_whichever_reordered_it(tmp_path: Path):
    raw = _raw(tmp_path / "raw", ONE, FENCE)
    got = group(raw, tmp_path / "bugs", cache=False)
    assert [b.cause.split("|")[3] for b in got.bugs] == ["C2b+IB-read-unfenced"], [b.cause for b in got.bugs]
    assert got.bugs[0].count == 3 and not got.left
    case = codec.load_dict(json.loads(got.bugs[0].case.read_text())["scenario"])
    assert not case.knobs.adaptive_routing and case.knobs.reorder_window == 2, case.to_json()
    assert "adaptive_routing" not in got.bugs[0].cause


def test_two_missing_fences_stay_two_bugs(tmp_path: Path):
    """The trade changes how a WR passed another, never which: the atomic's race on channel 0 and the flag's on
    channel 1, each found both ways, are two bugs, each row holding its own channel's findings."""
    raw = _raw(tmp_path / "raw", TWO, FENCE + FLAG)
    got = group(raw, tmp_path / "bugs", cache=False)
    assert sorted(b.cause.split("|")[3] for b in got.bugs) == ["A2b", "C2b+IB-read-unfenced"], \
        [b.cause for b in got.bugs]
    rows = {b.cause.split("|")[3]: b for b in got.bugs}
    assert rows["C2b+IB-read-unfenced"].count == 3 and rows["A2b"].count == 2 and not got.left
    for cells, channel in (("C2b+IB-read-unfenced", 0), ("A2b", 1)):
        out = get_backend("sim").run(codec.load_dict(json.loads(rows[cells].case.read_text())["scenario"]),
                                     REGISTRY.get(TWO))
        assert out.violation is not None and out.violation.channel == channel


def test_a_race_only_the_wire_can_show_keeps_adaptive_routing(tmp_path: Path):
    """With the NIC's RO off the root complex cannot move the flag past its data: there the finding needs
    adaptive routing, a platform of its own, and the row says so."""
    off = {**FLAG[1], "knobs": {**FLAG[1]["knobs"], "nic_relaxed_ordering": False}}
    got = group(_raw(tmp_path / "raw", TWO, [off]), tmp_path / "bugs", cache=False)
    assert [b.cause.split("|")[3:] for b in got.bugs] == [["AR", "adaptive_routing=True"]], [b.cause for b in got.bugs]


def test_the_zoo_read_flush_unfenced_is_one_bug(tmp_path: Path):
    """The zoo's read_flush_unfenced (a flag WRITE after READ+Flush, no fence; RO pinned on) is one mistake: its
    campaign's findings were two rows, `A2b+IB-read-unfenced` and `AR|adaptive_routing=True`."""
    from tests.triage.findings import raw_findings

    paths = raw_findings(tmp_path / "run", "read_flush_unfenced", 12, seed=0)
    got = group(paths, tmp_path / "bugs", cache=False)
    assert [(b.cause.split("|")[3], b.count) for b in got.bugs] == [("A2b+IB-read-unfenced", len(paths))], \
        [b.cause for b in got.bugs]
