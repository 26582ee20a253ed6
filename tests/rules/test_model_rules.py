"""The emulator's rules beyond the PCIe table, one test each (epfuzz.sim.pass_rules.tlp_pass_rule)."""

from __future__ import annotations

from epfuzz.model.ordering import Attrs, TlpType
from epfuzz.sim.packets import LocalStore, Packet, Tlp, TlpAction
from epfuzz.sim.pass_rules import packet_pass_rule, tlp_pass_rule

rule = tlp_pass_rule()


def tlp(seq: int, *, type: TlpType = TlpType.POSTED, ro: bool = False, qp: int = 0, epoch: int = 0,
        target: int = 0, local: LocalStore = LocalStore.NONE, dep: int = -1, hold: bool = False) -> Tlp:
    t = Tlp()
    t.seq, t.n, t.mps, t.epoch, t.attrs, t.action, t.qp = seq, 1, 256, epoch, Attrs(type, ro=ro), TlpAction.COPY, qp
    t.region, t.off, t.length, t.value, t.dep, t.hold, t.pkt, t.wr = "data", 0, 16, 0, dep, hold, 0, 0
    t.target, t.local = target, local
    return t


def test_table_applies_within_one_qp_and_path():
    assert rule(tlp(1), tlp(0)) is None                       # A2a
    assert rule(tlp(1, ro=True), tlp(0)) == "A2b"


def test_epoch_barrier():
    assert rule(tlp(1, ro=True, epoch=1), tlp(0, epoch=0)) is None


def test_no_order_across_qps():
    assert rule(tlp(1, qp=1), tlp(0, qp=0)) == "xQP"


def test_no_order_across_completers():
    assert rule(tlp(1, target=1), tlp(0, target=0)) == "path"


def test_rmw_write_never_passes_its_read():
    assert rule(tlp(1, ro=True, dep=0), tlp(0, type=TlpType.READ)) is None


def test_o920_atomic_held_behind_its_qps_writes_only():
    held = tlp(1, type=TlpType.NP_DATA, ro=True, hold=True)
    assert rule(held, tlp(0)) is None
    assert rule(tlp(1, type=TlpType.NP_DATA, ro=True, hold=True, qp=1), tlp(0, qp=0)) == "xQP"


def test_receiver_store_behind_a_barrier_is_never_passed():
    assert rule(tlp(1, ro=True), tlp(0, local=LocalStore.BARRIER)) is None


def test_receiver_store_without_barrier_races_the_epoch():
    assert rule(tlp(1), tlp(0, local=LocalStore.UNORDERED)) == "no-barrier"


def test_packets_keep_order_without_adaptive_routing():
    def P(seq: int, qp: int = 0) -> Packet:  # a real Packet: the rule reads its issue-30 fields unguarded
        p = Packet()
        p.seq, p.qp, p.epoch, p.wr = seq, qp, 0, seq
        return p

    assert packet_pass_rule(False)(P(1), P(0)) is None
    assert packet_pass_rule(True)(P(1), P(0)) == "AR"
