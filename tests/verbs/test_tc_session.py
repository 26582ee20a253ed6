"""tc for the verbs backend: one tc process fed batch after batch, and shaping only when it changes.

Host-side: the session runs harmless commands on `lo` (a delete that fails, a show), so it needs
the `tc` binary but no RDMA and changes nothing; the shaping cache is checked with a recording
stand-in for the session.
"""

from __future__ import annotations

import shutil

import pytest

from epfuzz.backends import verbs_net
from epfuzz.infra.errors import HarnessError

needs_tc = pytest.mark.skipif(shutil.which("tc") is None, reason="needs iproute2's tc")


@needs_tc
def test_a_session_reports_failures_by_their_place_in_each_batch():
    tc = verbs_net.TcSession()
    try:
        assert tc.run(["qdisc show dev lo"]) == []
        pid = tc.proc.pid
        # lo has no root qdisc to delete: both deletes fail; the session counts lines across batches
        assert tc.run(["qdisc show dev lo", "qdisc del dev lo root", "qdisc del dev lo root"]) == [2, 3]
        assert tc.run(["qdisc del dev lo root"]) == [1]
        assert "Cannot delete qdisc" in tc.errors
        assert tc.run(["qdisc show dev lo"]) == [] and tc.errors == ""
        assert tc.proc.pid == pid  # one process for all of them
    finally:
        tc.close()


@needs_tc
def test_a_session_whose_tc_died_starts_a_new_one():
    tc = verbs_net.TcSession()
    try:
        tc.run(["qdisc show dev lo"])
        first = tc.proc.pid
        tc.proc.kill()
        tc.proc.wait()
        assert tc.run(["qdisc del dev lo root"]) == [1]
        assert tc.proc.pid != first
        assert tc.run(["no-such-object", "qdisc show dev lo"]) == [1]  # -force: tc goes on
        assert "unknown" in tc.errors
    finally:
        tc.close()


class Recorder:
    def __init__(self, fail: list[int] | None = None) -> None:
        self.batches: list[list[str]] = []
        self.fail = fail or []
        self.errors = "boom"

    def run(self, cmds: list[str]) -> list[int]:
        self.batches.append(cmds)
        return self.fail


def test_shaping_runs_tc_only_when_it_changes(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(verbs_net, "_tc", rec)
    monkeypatch.setattr(verbs_net, "_shaped", {})
    verbs_net.shape("veth9", {17: (2_000_000, 1)}, 1)
    verbs_net.shape("veth9", {17: (2_000_000, 1)}, 1)
    assert len(rec.batches) == 1
    assert any("netem delay 2000us" in c and "1:1" in c for c in rec.batches[0])
    assert any("match u32 17 0x00ffffff at 32" in c for c in rec.batches[0])
    verbs_net.shape("veth9", {17: (2_000_000, 4)}, 1)
    assert len(rec.batches) == 2 and any("rate 250mbit" in c for c in rec.batches[1])
    verbs_net.shape("veth9", {}, 1)
    assert rec.batches[2] == ["qdisc del dev veth9 root"]  # unshaped: the root qdisc goes
    verbs_net.shape("veth9", {}, 1)
    assert len(rec.batches) == 3


def test_a_failed_shaping_is_an_error_and_is_not_remembered(monkeypatch):
    rec = Recorder(fail=[2])
    monkeypatch.setattr(verbs_net, "_tc", rec)
    monkeypatch.setattr(verbs_net, "_shaped", {})
    with pytest.raises(HarnessError, match="tc shaping failed on veth9: boom"):
        verbs_net.shape("veth9", {17: (1000, 1)}, 1)
    rec.fail = [1]  # only the first delete failed (nothing to delete): fine
    verbs_net.shape("veth9", {17: (1000, 1)}, 1)
    assert len(rec.batches) == 2
