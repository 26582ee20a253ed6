"""A verbs campaign reports each bug once (no VM: a stand-in device with rxe's behaviour).

Before: verbs findings were grouped by their raw signature, so one cross-QP race found under four
signal kinds, two fences and two MR orderings was "nine bugs" (a 30 s guest campaign). Now the
guest reduces each finding's signature knobs where it runs (`minimize.reduce_knobs`) and the host
takes the guest's grouping (`campaign_common.read_findings(grouped_at=...)`)."""

from __future__ import annotations

import pytest

from epfuzz import backends
from epfuzz.backends.base import Outcome
from epfuzz.backends.verbs import VerbsBackend
from epfuzz.campaign.common import read_findings
from epfuzz.encoding import codec
from epfuzz.infra.log import get_logger
from epfuzz.model.oracle import Violation
from epfuzz.protocols import get_protocol
from epfuzz.triage.findings import group_findings, write_bug_index, write_finding

PROTO = get_protocol("dispatch_any")


class StandIn(VerbsBackend):
    """Runs here; stale when the signal is on another QP (any kind, fence or MR ordering: rxe has
    no PCIe), or when a WRITE signal meets a relaxed MR (a second, unrelated bug)."""

    def __init__(self) -> None:
        self.runs = 0

    def runs_locally(self) -> bool:
        return True

    def run(self, scn, proto, repeats=1):
        self.runs += 1
        bad = scn.signal.other_qp or (scn.signal.kind == "write" and scn.knobs.mr_relaxed)
        v = Violation("stale-accept", scn.protocol, 0, 0, "accepted early") if bad else None
        return Outcome("verbs", v, runs=repeats, hits=repeats if bad else 0)


def scenario(kind: str, other_qp: bool, fence: bool, relaxed: bool):
    return codec.load_dict({"protocol": "dispatch_any", "topology": {"num_qps": 2},
                            "signal": {"kind": kind, "other_qp": other_qp, "fence": fence},
                            "knobs": {"mr_relaxed": relaxed}})


CROSS = [("faa", True, True, False), ("write", True, False, False), ("write_imm", True, True, True),
         ("send", True, False, True), ("faa", True, False, True)]
RELAXED_WRITE = [("write", False, True, True), ("write", False, False, True)]


@pytest.fixture
def stand_in(monkeypatch):
    dev = StandIn()
    monkeypatch.setitem(backends._cache, "verbs", dev)
    return dev


def findings(folder, cases):
    folder.mkdir(exist_ok=True)
    out = []
    for c in cases:
        scn = scenario(*c)
        out.append(write_finding(folder, scn, codec.encode(scn), StandIn().run(scn, PROTO), PROTO))
    return out


def test_one_race_under_many_signal_kinds_fences_and_mr_orderings_is_one_bug(tmp_path, stand_in):
    paths = findings(tmp_path / "run", CROSS + RELAXED_WRITE)
    assert len({p.name for p in paths}) == 7
    bugs = group_findings(paths, tmp_path / "run" / "bugs", "verbs").bugs
    causes = {b.cause.split("|")[-1]: b.count for b in bugs}
    assert causes == {"other_qp=True": 5, "kind=write,mr_relaxed=True": 2}, causes
    for b in bugs:  # the reduced case replays as the bug it stands for
        from epfuzz.cases.corpus import load_case

        case = load_case(b.case)
        assert case.signature == b.cause
        assert stand_in.run(case.scenario, PROTO).violation is not None


def test_a_finding_that_does_not_reproduce_keeps_its_raw_signature(tmp_path, monkeypatch, stand_in):
    paths = findings(tmp_path / "run", CROSS[:2])
    monkeypatch.setattr(StandIn, "run", lambda self, scn, proto, repeats=1: Outcome("verbs", None, repeats, 0))
    bugs = group_findings(paths, tmp_path / "run" / "bugs", "verbs").bugs
    assert len(bugs) == 2 and all("kind=" in b.cause for b in bugs)


def test_the_host_takes_the_grouping_the_guest_made(tmp_path, monkeypatch, stand_in):
    run = tmp_path / "run"
    paths = findings(run, CROSS + RELAXED_WRITE)
    guest_root = "/tmp/guest-run"
    # what the guest wrote: its index names its own paths
    grouping = group_findings(paths, run / "bugs", "verbs")
    for b in grouping.bugs:
        b.case = type(b.case)(guest_root) / "bugs" / b.case.name
    write_bug_index(grouping, run / "bugs.csv")
    extra = findings(run, [("send", False, True, False)])  # a finding the guest's index does not name
    # the host cannot run verbs: were it to regroup, every finding would be its own bug
    monkeypatch.setattr(StandIn, "runs_locally", lambda self: False)
    before = stand_in.runs
    _, grouping = read_findings(run, "verbs", get_logger(harness="t"), grouped_at=guest_root)
    got = grouping.bugs
    assert stand_in.runs == before
    assert [b.count for b in got] == [5, 2, 1]
    assert all(b.case.is_file() and b.case.is_relative_to(run) for b in got)
    assert got[-1].raw == extra
    text = (run / "bugs.csv").read_text()
    assert guest_root not in text and str(run) in text


class FlakyCrossQp(StandIn):
    """A cross-QP race (stale with two QPs or more) seen in 3 of 5 runs, told apart by the QP count."""

    def signature_fields(self, proto):
        return ("topology.num_qps",)

    def run(self, scn, proto, repeats=1):
        self.runs += 1
        bad = scn.topology.num_qps >= 2
        v = Violation("stale-accept", scn.protocol, 0, 0, "accepted early") if bad else None
        hits = (3 * repeats + 4) // 5 if bad else 0
        return Outcome("verbs", v if hits else None, runs=repeats, hits=hits)


def test_a_count_knob_goes_to_the_smallest_value_the_finding_survives(tmp_path, monkeypatch):
    """Issue 26.3: seven QP counts were seven bugs (`num_qps=1` kills the race, so the knob was kept
    at each count found); and the replay line must carry the runs a flaky finding needs."""
    from epfuzz.triage.findings import bug_table

    dev = FlakyCrossQp()
    monkeypatch.setitem(backends._cache, "verbs", dev)
    folder = tmp_path / "run"
    folder.mkdir()
    paths = []
    for n in range(2, 9):
        scn = codec.load_dict({"protocol": "dispatch_any", "topology": {"num_qps": n}})
        paths.append(write_finding(folder, scn, codec.encode(scn), dev.run(scn, PROTO, 5), PROTO))
    grouping = group_findings(paths, folder / "bugs", "verbs")
    assert [(b.cause.split("|")[-1], b.count) for b in grouping.bugs] == [("num_qps=2", 7)]
    bug = grouping.bugs[0]
    assert bug.repeats == 6 and bug.rate == 0.6  # 1 - 0.4**6 > 99%
    text = "\n".join(bug_table(grouping, "verbs"))
    assert "--backend verbs --repeats 6" in text and "reproduced in 60% of runs" in text
