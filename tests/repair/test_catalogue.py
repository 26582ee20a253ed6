"""Each catalogue edit does what its doc says to the op lists, and the wrapper leaves the original alone."""

from __future__ import annotations

from epfuzz.encoding import codec
from epfuzz.ir import ops
from epfuzz.protocols import get_protocol
from epfuzz.repair import CATALOGUE, Repaired, catalogue
from epfuzz.repair.search import applicable
from epfuzz.repair.wrap import observable

EDITS = {e.name: e for e in CATALOGUE}


def _programs(name: str, edit: str, **shape: object) -> tuple[list[list[ops.Op]], list[list[ops.Op]]]:
    scn = codec.load_dict({"protocol": name, **shape})
    base = get_protocol(name)
    rep = Repaired(base, [EDITS[edit]])
    lay = base.layout(scn)
    return base.sender(scn, lay, 0), rep.sender(rep.scenario(scn), lay, 0)


def test_flush_before_signal_flushes_each_data_qp_once_per_signal():
    before, after = _programs("flush_other_qp_fixed", "flush-before-signal", payload={"num_tokens": 2})
    assert before == after  # it flushes already: nothing to add
    before, after = _programs("deepep_v2_dispatch", "flush-before-signal", payload={"num_tokens": 2},
                              signal={"interval": 1})
    (prog,) = after
    kinds = [type(op).__name__ for op in prog]
    assert kinds == ["Write", "Flush", "AtomicAdd", "Write", "Flush", "AtomicAdd"]
    assert len(prog) == len(before[0]) + 2


def test_signal_on_data_qp_moves_the_signal_only():
    before, after = _programs("flush_other_qp", "signal-on-data-qp", topology={"num_qps": 2})
    (b,), (a,) = before, after
    data_qp = next(op.qp for op in b if isinstance(op, ops.Write))
    assert [type(op) for op in a] == [type(op) for op in b]
    assert all(op.qp == data_qp for op in a if isinstance(op, ops.AtomicAdd))
    assert any(op.qp != data_qp for op in b if isinstance(op, ops.AtomicAdd))


def test_atomic_signal_adds_what_the_flag_wrote():
    before, after = _programs("flag_write_signal", "atomic-signal", payload={"num_tokens": 3},
                              signal={"interval": 1})
    flags = [op.value for op in before[0] if isinstance(op, ops.WriteValue)]
    adds = [op.delta for op in after[0] if isinstance(op, ops.AtomicAdd)]
    assert len(adds) == len(flags) == 3 and not any(isinstance(op, ops.WriteValue) for op in after[0])
    assert [sum(adds[:i + 1]) for i in range(3)] == flags   # the word reads what the flag would have


def test_atomic_signal_does_not_apply_where_words_keep_last_calls_value():
    before, after = _programs("stale_epoch_counter", "atomic-signal")
    assert before == after


def test_receiver_slot_writes_where_the_receiver_reads():
    before, after = _programs("geometry_index", "receiver-slot", topology={"num_channels": 3},
                              payload={"num_tokens": 6, "hidden_bytes": 16, "scale_bytes": 0})
    moved = [(b, a) for pb, pa in zip(before, after) for b, a in zip(pb, pa) if b != a]
    assert moved and all(a.offset == b.offset + b.shift and a.shift == 0 for b, a in moved)


def test_receiver_options_come_from_the_receivers_signature():
    names = {e.name for e in catalogue(get_protocol("shared_counter"))}
    assert "receiver:wait_total" in names
    assert "receiver:wait_total" not in {e.name for e in catalogue(get_protocol("shared_counter_fixed"))}


def test_wrapping_leaves_the_original_protocol_untouched():
    base = get_protocol("early_credit_release")
    scn = codec.load_dict({"protocol": "early_credit_release"})
    before = observable(scn, base)
    rep = Repaired(base, [EDITS["credit-after-read"]])
    assert rep.release_at_accept is False and base.release_at_accept is True
    assert observable(scn, base) == before != observable(scn, rep)


def test_strict_window_pins_the_field_the_original_pins_otherwise():
    base = get_protocol("deepep_v2_dispatch")
    scn = codec.load_dict({"protocol": "deepep_v2_dispatch"})
    rep = Repaired(base, [EDITS["strict-window"]])
    assert scn.knobs.mr_relaxed and not rep.scenario(scn).knobs.mr_relaxed
    assert rep.fixed["knobs.mr_relaxed"] is False
    assert "strict-window" in [e.name for e in applicable(scn, base)]
    assert "system-fence" not in [e.name for e in applicable(scn, base)]   # gpu.* matters under nvlink only


def test_what_a_protocol_does_does_not_depend_on_where_its_objects_live():
    """A receiver's `ready` lambda (GatherReceiver) was compared by `repr`, which holds its address: whether an edit
    applied to a case depended on the allocator (`epfuzz repair` listed 8 or 3 edits for one finding, review).
    Functions compare by code, place and what they close over."""
    from epfuzz.repair.wrap import stable_repr

    def make(want):
        return lambda word, c, epoch: word >= want

    a, b = make(3), make(3)
    keep = [make(3) for _ in range(100)]  # other allocations between them
    assert a is not b and repr(a) != repr(b) and keep
    assert stable_repr(a) == stable_repr(b)
    assert stable_repr(a) != stable_repr(make(4))  # what it closes over
    assert stable_repr(a) != stable_repr(lambda word, c, epoch: word > 3)  # its code
    assert stable_repr((a, [1, "x"])) == stable_repr((b, [1, "x"]))

    class Thing:
        pass

    assert stable_repr(Thing()) == stable_repr(Thing())  # '<... Thing object at 0x...>' without the address


def test_the_wrapper_carries_every_setting_of_the_protocol():
    """Every class-level setting of `Protocol` that a run reads is the base's on the wrapper: a setting left out
    took the default (a repaired `stale_cache` lost its receiver's L2 lines, `rx_map`, and every edit, one that
    changed nothing included, was proven to fix it; review, 2026-12-05)."""
    from epfuzz.protocols import REGISTRY, get_protocol
    from epfuzz.protocols.base import Protocol
    from epfuzz.repair.wrap import Repaired

    settings = [a for a, v in vars(Protocol).items()
                if not a.startswith("_") and not callable(v) and not isinstance(v, (property, staticmethod))
                and a not in ("name", "doc", "expect", "fixed")]
    assert {"rx_map", "flush_before_poll", "poison", "reset_signals"} <= set(settings)
    differ = 0
    for name in REGISTRY.items:
        base = get_protocol(name)
        rep = Repaired(base, [])
        for a in settings:
            assert getattr(rep, a) == getattr(base, a), (name, a)
            differ += getattr(base, a) != getattr(Protocol, a)
    assert differ  # the registry holds protocols whose settings are not the defaults
    assert Repaired(get_protocol("stale_cache"), []).rx_map == "cached"
