"""A Flush or a fence that waited for an ATOMIC's response orders the channel's later WRs behind the atomic's
execution (IB-atomic-executed): a protocol author's trial, 2026-12-05, H1 (a false alarm on every preset).

The A/B pairs are the trial's: one channel, two QPs, window 4, no schedule; `explore` proves each verdict for
the scenario. The READ flush (B2a) was already clean; the fetch-and-add of 0 was a finding even on a strict MR,
as if its response said only that the responder had the packet. Only PCI atomic mode 4 with RO on the MR and
the NIC and no o9-20 lets the AtomicOp pass the data (C2b), and the flag with it: that finding stays.
"""

from __future__ import annotations

import random

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import simulate
from epfuzz.sim.explore import explore

MOD = "tests.sim.atomflush_plugins"


def _ab(name: str, mode: int, ro: bool, num_qps: int = 2, o920: bool = False) -> Scenario:
    return codec.load_dict({
        "protocol": f"{MOD}:{name}",
        "knobs": {"mr_relaxed": ro, "nic_relaxed_ordering": ro, "atomic_mode": mode, "hca_o920": o920,
                  "reorder_window": 4},
        "topology": {"num_channels": 1, "num_qps": num_qps},
        "payload": {"hidden_bytes": 16, "scale_bytes": 0, "meta_bytes": 16, "num_tokens": 1}})


def _reachable(scn: Scenario) -> bool:
    return explore(scn, get_protocol(scn.protocol)).violation is not None


@pytest.mark.parametrize("ro", [False, True])
def test_read_flush_then_the_flag_on_the_next_qp_is_unreachable(ro):
    assert not _reachable(_ab("ReadFlushXQP", 0, ro))


@pytest.mark.parametrize("mode,ro", [(0, False), (0, True), (4, False)])
def test_atomic_flush_then_the_flag_on_the_next_qp_is_unreachable_but_for_c2b(mode, ro):
    """Mode 0: the atomic's MemRd passes no earlier posted write (B2a, RO or not); mode 4, strict MR: its
    AtomicOp passes none (C2a). The flag, posted after the response, is behind that TLP."""
    assert not _reachable(_ab("AtomicFlushXQP", mode, ro))


def test_atomic_flush_with_an_ro_atomicop_is_still_a_finding_and_o920_fixes_it():
    assert _reachable(_ab("AtomicFlushXQP", 4, True))          # C2b: the AtomicOp passes the RO data
    assert not _reachable(_ab("AtomicFlushXQP", 4, True, o920=True))  # the HCA holds it behind them


@pytest.mark.parametrize("mode,ro,found", [(0, False, False), (0, True, False), (4, False, False), (4, True, True)])
def test_the_fence_after_an_atomic_orders_the_flag_on_its_qp(mode, ro, found):
    """One QP: data, FAA 0, the flag with IBV_SEND_FENCE: as the Flush, only C2b leaves a finding."""
    assert _reachable(_ab("AtomicFenceSameQP", mode, ro, num_qps=1)) == found


@pytest.mark.parametrize("name", ["AtomicFlushXQP", "AtomicFenceSameQP"])
def test_random_scenarios_keep_the_authors_promise_per_preset(name):
    """Decoded scenarios (schedules included) of each preset: a finding only where the protocol promised one
    (C2b presets), and some there; the trial saw findings under no-ro, mlx5-default and ib-o9-20."""
    spec = f"{MOD}:{name}"
    proto = get_protocol(spec)
    rng = random.Random(1205)
    found = {}
    for preset in ("no-ro", "mlx5-default", "ib-o9-20", "mlx5-pci-atomic"):
        found[preset] = sum(simulate(codec.decode(rng.randbytes(rng.randrange(16, 96)), spec, preset),
                                     proto).violation is not None for _ in range(150))
    assert found["no-ro"] == found["mlx5-default"] == found["ib-o9-20"] == 0, found
    assert found["mlx5-pci-atomic"] > 0, found


def test_explain_says_another_channels_wr_was_not_behind_the_flushed_atomic():
    """Two channels on two QPs: channel 1's atomic MemRd (QP 1) moved before channel 0's (QP 0), which channel
    0's Flush waited for. Channel 1 never waited for it, so the pass is allowed, and explain says why (not
    "IB-local-only, the responder had its bytes": an atomic's response needed its execution)."""
    from epfuzz.ir.scenario import Overtake
    from epfuzz.sim.engine import build
    from epfuzz.triage.explain import overtake_lines

    scn = codec.load_dict({"protocol": f"{MOD}:AtomicFlushXQP", "knobs": {"atomic_mode": 0, "reorder_window": 64},
                           "topology": {"num_channels": 2, "num_qps": 2},
                           "payload": {"hidden_bytes": 16, "scale_bytes": 0, "meta_bytes": 16, "num_tokens": 2}})
    proto = get_protocol(scn.protocol)
    mine = [t for t in build(scn, proto).tlps if t.qp == 1 and t.attrs.type.name == "READ"]
    assert len(mine) == 1
    run = simulate(scn.replace(schedule=(Overtake("pcie", mine[0].seq, 64),)), proto)
    lines = [x for x in overtake_lines(run) if x.startswith("xQP: MemRd of recv bytes 32-39 passed MemRd")]
    assert len(lines) == 1 and "WR 3 of channel 1 was not posted behind that wait" in lines[0], lines
