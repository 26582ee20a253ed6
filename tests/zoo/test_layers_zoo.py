"""Issue 30's pairs on the new model layers: RDMA READ (epfuzz/protocols/pull.py) and copy-engine batches
(epfuzz/protocols/cebatch.py). Each bad form is found from nothing with a fixed seed within a bounded
budget (the schedule sampler over random configurations) and by exhaustive exploration of a small shape;
the overtakes of its finding name the layer's clause; each fixed form stays clean under the sampler and
random inputs, and exploration proves the small shape clean under every platform setting it leaves free
(PCI atomic mode, o9-20, adaptive routing). The 100,000-execution runs: bench/fixed_budget.md."""

from __future__ import annotations

from typing import Any

import pytest

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import cebatch, get_protocol, pull
from epfuzz.sim.explore import explore
from tests.zoo.family import Bad, Family, scenario

PAIRS = pull.PAIRS + cebatch.PAIRS
_W = {"reorder_window": 4}
#: sampler budgets: the executions to the first finding with seed 1, measured (December 2026: 4, 72, 1, 2),
#: times ~4 and at least 100; each finding rests on the layer's clause, which `explain` names
FAMILY = Family(PAIRS, {
    "read_flush_unfenced": Bad(1, 100, "stale-accept", {"knobs": _W, "payload": {"num_tokens": 2}},
                               clause="IB-read-unfenced"),
    "read_flush_other_qp": Bad(1, 300, "stale-accept", {"knobs": _W, "payload": {"num_tokens": 2},
                                                        "topology": {"num_qps": 2}}, clause="xQP"),
    "ce_batch_signal": Bad(1, 100, "stale-accept", {"knobs": _W, "payload": {"num_tokens": 2}}, clause="CE-batch"),
    "ce_signal_override": Bad(1, 100, "hang", {"knobs": _W, "payload": {"num_tokens": 2, "epochs": 2}},
                              clause="CE-batch"),
}, platform={"atomic_mode": (0, 4), "hca_o920": (False, True), "adaptive_routing": (False, True)})
globals().update(FAMILY.tests())


def _scn(name: str, shape: dict[str, Any], **knobs: Any) -> Any:
    return scenario(name, shape, **knobs)


def test_the_pairs_differ_only_in_the_fence_or_the_reads_qp():
    scn = codec.load_dict({"protocol": "read_flush_unfenced", "payload": {"num_tokens": 3},
                           "topology": {"num_qps": 2}})
    lay = get_protocol("read_flush_unfenced").layout(scn)
    (bad,) = get_protocol("read_flush_unfenced").sender(scn, lay, 0)
    (fixed,) = get_protocol("read_flush_unfenced_fixed").sender(scn, lay, 0)
    assert bad[:-1] == fixed[:-1] and isinstance(bad[-2], ops.Read) and bad[-2].qp == bad[0].qp
    assert not bad[-1].fence and fixed[-1].fence
    (other,) = get_protocol("read_flush_other_qp").sender(scn, lay, 0)
    (same,) = get_protocol("read_flush_other_qp_fixed").sender(scn, lay, 0)
    assert other[-3] == ops.Read(1, ops.DATA, bad[-2].offset, 8) and other[-2] == ops.Flush(1)
    assert same[-3] == bad[-2] and same[-2] == ops.Flush(0)
    one = _scn("read_flush_other_qp", {"knobs": {"reorder_window": 4}, "payload": {"num_tokens": 2}})
    assert explore(one, get_protocol("read_flush_other_qp"), max_states=50_000).violation is None  # one QP


def test_backends_that_cannot_run_a_read_say_why():
    """The cuda interpreter has no READ (a peer load is not a NIC's MemRd). Under the nvlink preset a READ
    is a weak peer load that orders nothing: the fixed form is no promise there unless the signal is fenced."""
    from epfuzz.backends.cuda_prog import encode_programs
    from epfuzz.infra.errors import Unsupported

    proto = get_protocol("read_flush_unfenced_fixed")
    scn = codec.load_dict({"protocol": proto.name, "payload": {"num_tokens": 2}})
    with pytest.raises(Unsupported, match="RDMA READ has no GPU form"):
        encode_programs(proto, scn, proto.layout(scn))
    nv = {"protocol": proto.name, "preset": "nvlink", "payload": {"num_tokens": 2}}
    assert proto.expected(codec.load_dict(nv)) == ""
    assert proto.expected(codec.load_dict({**nv, "gpu": {"fence": "threadfence_system"}})) == "clean"


def test_ce_batches_hold_what_each_form_says():
    scn = codec.load_dict({"protocol": "ce_batch_signal", "payload": {"num_tokens": 3, "epochs": 2}})
    lay = get_protocol("ce_batch_signal").layout(scn)

    def batches(name: str, epoch: int = 1) -> list[list[tuple[str, int]]]:
        (prog,) = get_protocol(name).sender(scn, lay, epoch)
        out: dict[int, list[tuple[str, int]]] = {}
        for op in prog:
            assert isinstance(op, ops.CeCopy | ops.CeValue)
            out.setdefault(op.batch, []).append((type(op).__name__, getattr(op, "value", -1)))
        return [out[b] for b in sorted(out)]

    assert batches("ce_batch_signal") == [[("CeCopy", -1)] * 3 + [("CeValue", 6)]]  # one batch: data + signal
    assert batches("ce_batch_signal_fixed") == [[("CeCopy", -1)] * 3, [("CeValue", 6)]]
    assert batches("ce_signal_override") == [[("CeCopy", -1)] * 3, [("CeValue", 4), ("CeValue", 5), ("CeValue", 6)]]
    assert batches("ce_signal_override_fixed") == [[("CeCopy", -1)] * 3, [("CeValue", 4)], [("CeValue", 5)],
                                                   [("CeValue", 6)]]


def test_the_override_needs_two_signals_to_one_slot_in_a_batch():
    """One token per channel: one signal per batch either way, and the bad form is clean."""
    one = _scn("ce_signal_override", {"knobs": {"reorder_window": 4}, "payload": {"num_tokens": 1, "epochs": 2}})
    assert explore(one, get_protocol("ce_signal_override"), max_states=50_000).violation is None


def test_backends_that_cannot_run_copy_engine_batches_say_why():
    from epfuzz.backends.cuda_prog import encode_programs
    from epfuzz.backends.verbs import VerbsBackend, refusal
    from epfuzz.infra.errors import Unsupported

    proto = get_protocol("ce_batch_signal_fixed")
    scn = codec.load_dict({"protocol": proto.name, "payload": {"num_tokens": 2}})
    assert "copy engine has no verbs form" in refusal(scn, proto)
    assert refusal(codec.load_dict({"protocol": "read_flush_unfenced"}), get_protocol("read_flush_unfenced")) == ""
    with pytest.raises(Unsupported, match="copy engine has no verbs form"):
        VerbsBackend().run(scn, proto)  # refused on the host, before any guest
    with pytest.raises(Unsupported, match="copy-engine batches are not driven by the interpreter"):
        encode_programs(proto, scn, proto.layout(scn))
    # under nvlink too the copies keep the copy-engine clauses: the bad form's finding needs CE-batch
    bad = get_protocol("ce_batch_signal")
    scn = codec.load_dict({"protocol": bad.name, "preset": "nvlink", "payload": {"num_tokens": 2},
                           "knobs": {"reorder_window": 4}})
    found = explore(scn, bad, max_states=50_000)
    assert found.violation is not None
