"""The public decoder a harness or mutator drives, and the typed field specs behind it."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epfuzz.encoding import codec
from epfuzz.infra.errors import InputError
from epfuzz.ir.choices import ChoiceReader
from epfuzz.ir.fields import FieldSpec, Kind
from epfuzz.ir.scenario import SpinFault, iter_leaf_fields
from epfuzz.protocols import REGISTRY


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(sorted(REGISTRY.items)))
def test_decoder_for_decodes_as_decode(data, protocol):
    decode = codec.decoder_for(protocol, "mlx5-default")
    r = ChoiceReader(data)
    s = decode(r)
    assert s == codec.decode(data, protocol, "mlx5-default")
    assert s.protocol == protocol and s.preset == "mlx5-default"
    # the canonical encoding is never longer than what the decoder read
    assert len(codec.encode(s)) <= r.pos


def test_decoder_for_rejects_unknown_names_at_once():
    with pytest.raises(InputError, match="unknown protocol"):
        codec.decoder_for("nope")
    with pytest.raises(InputError, match="unknown preset"):
        codec.decoder_for("dispatch_any", "nope")


def test_every_leaf_is_typed():
    leaves = dict(iter_leaf_fields())
    assert all(isinstance(spec, FieldSpec) for spec in leaves.values())
    assert leaves["payload.num_tokens"].kind is Kind.INT
    assert leaves["faults.spins"].kind is Kind.ITEMS and leaves["faults.spins"].cls is SpinFault


def test_spin_faults_keep_their_json_field_names():
    s = codec.load_dict({"protocol": "dispatch_any", "topology": {"num_channels": 2},
                         "faults": {"spins": [{"channel": 1, "before_op": 2, "ns": 300}]}})
    assert s.faults.spins == (SpinFault(channel=1, before_op=2, ns=300),)
    assert s.to_dict()["faults"]["spins"] == [{"channel": 1, "before_op": 2, "ns": 300}]
    assert codec.load_json(s.to_json()) == s


def test_compiled_decoder_equals_plan_walk() -> None:
    """The straight-line decoder (issue 14) draws exactly what the slot-by-slot plan walk draws."""
    import random

    from epfuzz.encoding.codec import _plan_for
    from epfuzz.ir.choices import ChoiceReader
    from epfuzz.ir.presets import PRESETS
    from epfuzz.protocols import REGISTRY

    rng = random.Random(14)
    lists = ("schedule", "faults.spins", "faults.qp_delay_ns", "faults.qp_rate_div", "topology.channel_qp")
    seen: set[str] = set()
    for name in REGISTRY.items:
        for preset in PRESETS:
            plan = _plan_for(name, preset)
            for _ in range(40):
                data = rng.randbytes(rng.randrange(0, 160))
                fast, slow = ChoiceReader(data), ChoiceReader(data)
                fv: dict[str, object] = {}
                sv: dict[str, object] = {}
                assert plan.decode(fast, fv) == plan.walk_decode(slow, sv)
                assert fast.pos == slow.pos and fv == sv
                seen |= {k for k in lists if fv.get(k)}
    assert seen == set(lists)  # the lists, inlined in the compiled decoder (issue 31), were drawn non-empty


def test_compiled_encoder_equals_plan_walk() -> None:
    """The straight-line encoder (issue 31) writes exactly the bytes, and records exactly the values, of the
    slot-by-slot walk, for every protocol and preset; a value out of its range raises in both."""
    import dataclasses
    import random

    from epfuzz.encoding.codec import _plan_for
    from epfuzz.ir.choices import ChoiceWriter
    from epfuzz.ir.presets import PRESETS
    from epfuzz.protocols import REGISTRY

    def run(fn, obj):
        w, values = ChoiceWriter(), {}
        try:
            fn(w, values, obj)
        except ValueError as e:
            return ("error", str(e), values)
        return (w.getvalue(), values)

    rng = random.Random(31)
    for name in REGISTRY.items:
        for preset in PRESETS:
            plan = _plan_for(name, preset)
            for _ in range(20):
                scn = codec.decode(rng.randbytes(rng.randrange(0, 160)), name, preset)
                assert run(plan.encode, scn) == run(plan.walk_encode, scn)
            # out of range: a section's int past its bound, a choice that is not an option
            bad = scn.replace(payload=dataclasses.replace(scn.payload, num_tokens=10**6))
            assert run(plan.encode, bad) == run(plan.walk_encode, bad)
            bad = scn.replace(signal=dataclasses.replace(scn.signal, kind="nope"))
            assert run(plan.encode, bad) == run(plan.walk_encode, bad)


def test_compiled_decoder_passes_fields_by_position_only_where_they_are_the_parameters() -> None:
    """A section is built by position when its parameters are exactly positional-or-keyword ones (issue 31);
    anything else (keyword-only, *args, **kwargs, no signature) keeps the keywords."""
    from dataclasses import dataclass, field

    from epfuzz.encoding.codec_compile import _positional
    from epfuzz.ir.scenario import Overtake, Scenario

    @dataclass(frozen=True)
    class KwOnly:
        a: int = 0
        b: int = field(default=0, kw_only=True)

    class Star:
        def __init__(self, a: int, *rest: int) -> None:
            pass

    assert _positional(Overtake) == ["stage", "index", "distance"]
    assert _positional(Scenario)[:3] == ["protocol", "preset", "knobs"]
    assert _positional(KwOnly) == [] and _positional(Star) == [] and _positional(int) == []


def test_inlined_lists_make_the_reader_draws_of_the_list_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled decoder's inlined lists (issue 31) call the reader's `draw` exactly where `IntsField.draw`
    and `ItemsField.draw` did, at the same offsets: `search.context.field_bounds` records those, and the
    guided search mutates at them. Reference: the same plan compiled with every list calling its spec."""
    import random

    from epfuzz.encoding import codec_compile as cc
    from epfuzz.encoding.codec import _FREE, _plan_for
    from epfuzz.ir.presets import PRESETS
    from epfuzz.protocols import REGISTRY
    from epfuzz.search.context import field_bounds

    def by_spec(src, v, spec, *rest):  # type: ignore[no-untyped-def]  # the pre-issue-31 line
        nested = rest[0] if isinstance(spec, cc.ItemsField) else None
        return [f"r.pos = pos; {v} = {src.const(spec)}.draw(r, values, {src.const(nested)}); pos = r.pos"]

    rng = random.Random(31)
    inputs = [rng.randbytes(rng.randrange(0, 200)) for _ in range(25)]
    compiled = {(n, p): cc.compile_plan(_plan_for(n, p), _FREE) for n in REGISTRY.items for p in PRESETS}
    monkeypatch.setattr(cc, "_ints_lines", by_spec)
    monkeypatch.setattr(cc, "_items_lines", by_spec)
    for (name, preset), fast in compiled.items():
        slow = cc.compile_plan(_plan_for(name, preset), _FREE)
        for data in inputs:
            assert field_bounds(data, lambda r, f=fast: f(r, {})) == field_bounds(data, lambda r, f=slow: f(r, {}))
            assert fast(ChoiceReader(data), {}) == slow(ChoiceReader(data), {})


def _walk_and_loop(plan, data):  # type: ignore[no-untyped-def]
    """The plan walk's scenario and values, and the compiled loop's (`plancore`), the values of an item's fields
    left out where the loop stopped at the end of the input (the walk's hold the last item's, which may be one
    past the end)."""
    from epfuzz.encoding import plancore

    def item_paths(prog):  # type: ignore[no-untyped-def]
        for s in prog.steps:
            if s.kind == plancore.ITEMS:
                yield from (t.path for t in s.nested.steps)
            if s.nested is not None:
                yield from item_paths(s.nested)

    walked: dict[str, object] = {}
    looped: dict[str, object] = {}
    want = plan.walk_decode(ChoiceReader(data), walked)
    cur = plancore.Cursor(data)
    got = plan.program().run(cur, looped)
    if cur.pos >= len(data):
        for path in item_paths(plan.program()):
            walked.pop(path, None)
            looped.pop(path, None)
    return want, walked, got, looped, cur


def _kept(prog):  # type: ignore[no-untyped-def]
    """The paths `prog`'s loop records (`plancore.keep_read`)."""
    return {s.path for s in prog.steps if s.keep} | {p for s in prog.steps if s.nested for p in _kept(s.nested)}


def test_plan_loop_decodes_as_the_plan_walk() -> None:
    """`plancore`'s loop over the plan as data (issue 31.3, what `codec.decode` runs compiled) decodes every
    input, and every prefix of it (the fields past the end come from the program's constants), to what the
    slot-by-slot walk decodes, for every protocol and preset; the values it records (those a bound reads,
    `plancore.keep_read`) are the walk's up to where the input ends."""
    import random

    from epfuzz.encoding.codec import _plan_for
    from epfuzz.ir.presets import PRESETS

    rng = random.Random(313)
    for name in REGISTRY.items:
        for preset in PRESETS:
            plan = _plan_for(name, preset)
            assert plan.program().tail is not None
            kept = _kept(plan.program())
            for _ in range(12):
                data = rng.randbytes(rng.randrange(0, 160))
                for cut in sorted({len(data), *(rng.randrange(len(data) + 1) for _ in range(4))}):
                    want, walked, got, looped, cur = _walk_and_loop(plan, data[:cut])
                    assert got == want and repr(got) == repr(want)
                    assert looped == {k: v for k, v in walked.items() if k in looped}
                    if cur.pos < cut:  # read to the end of the plan inside the input: every value a bound reads
                        assert looped == {k: v for k, v in walked.items() if k in kept}


def test_codec_decode_runs_the_loop_where_it_is_compiled() -> None:
    from epfuzz.encoding import codec, plancore

    assert (not str(plancore.__file__).endswith(".py")) == codec.LOOP
    data = bytes(range(7, 97))
    assert codec.decode(data, "dispatch_any") == codec._plan_for("dispatch_any", "spec").program().decode(data)


def test_plan_loop_draws_every_kind_as_the_walk() -> None:
    """A schema of every kind and corner the loop has its own code for: a log int with lo > 0, a bound below lo
    (`hi_from` of a 0), a bound from a function, a list whose length and bound come from earlier fields, items,
    a multi-byte draw cut by the end of the input, a pinned field; and a spec subclass (drawn by its own
    `draw`, which makes the program and every program above it run without a tail)."""
    import dataclasses
    import random
    from dataclasses import dataclass

    from epfuzz.encoding import plancore
    from epfuzz.encoding.codec import _Plan
    from epfuzz.ir.fields import BoolField, ChoiceField, IntField, IntsField, ItemsField, SectionField, declare

    @dataclass(frozen=True, slots=True)
    class Odd(IntField):  # draws its value reversed: not IntField's draw
        def draw(self, r, values, nested):  # type: ignore[no-untyped-def]
            return self.hi - IntField.draw(self, r, values, nested)

    @dataclass(frozen=True)
    class Item:
        a: int = declare(IntField(3, 40000, "", log=True))
        b: int = declare(IntField(0, 9, "", hi_from="n"))

    @dataclass(frozen=True)
    class Inner:
        k: str = declare(ChoiceField(("x", "y", "z"), ""))
        f: bool = declare(BoolField(""))
        w: int = declare(IntField(5, 70000, ""))

    @dataclass(frozen=True)
    class Top:
        n: int = declare(IntField(0, 5, ""))
        m: int = declare(IntField(2, 9, "", hi_fn=lambda v: v["n"] * 3 - 4))
        xs: tuple[int, ...] = declare(IntsField(1, 300, 6, "", len_from="n", hi_from="m", log=True))
        items: tuple[Item, ...] = declare(ItemsField(Item, 3, ""))
        inner: Inner = declare(SectionField(Inner))
        pinned: int = declare(IntField(0, 9, ""))
        last: int = declare(IntField(1, 1 << 20, "", log=True))

    @dataclass(frozen=True)
    class OddInner:
        odd: int = declare(Odd(0, 200, ""))

    @dataclass(frozen=True)
    class WithOdd:
        inner: Inner = declare(SectionField(Inner))
        o: OddInner = declare(SectionField(OddInner))

    rng = random.Random(31)
    plan = _Plan(Top, "", {"pinned": 7})
    kinds = {s.kind for s in plan.program().steps} | {s.kind for s in plan.program().steps[3].nested.steps}
    assert kinds == {plancore.INT, plancore.LOG, plancore.INTS, plancore.ITEMS, plancore.SECTION, plancore.FIXED}
    odd = _Plan(WithOdd, "", {})
    assert plan.program().tail == Top(pinned=7) and odd.program().tail is None
    assert odd.program().steps[0].nested.tail == Inner() and odd.program().steps[1].nested.tail is None
    assert odd.program().steps[1].nested.steps[0].kind == plancore.SPEC
    for _ in range(400):
        data = rng.randbytes(rng.randrange(0, 40))
        for p in (plan, odd):
            want, walked, got, looped, _ = _walk_and_loop(p, data)
            assert got == want
            assert looped == {k: v for k, v in walked.items() if k in looped}
    assert _walk_and_loop(odd, b"")[2] == WithOdd(o=OddInner(odd=200))
    assert dataclasses.replace(plan.program().decode(b"\x05\x09"), n=5).pinned == 7


def test_cursor_draws_as_the_reader() -> None:
    """`plancore.Cursor.draw` against `ChoiceReader.draw`: spans of one byte and of several, cut by the end."""
    import random

    from epfuzz.encoding import plancore

    rng = random.Random(7)
    for _ in range(3000):
        data = rng.randbytes(rng.randrange(0, 6))
        lo = rng.randrange(-5, 50)
        hi = lo + rng.choice([0, 1, 255, 256, 257, 65535, 65536, 1 << 24, (1 << 24) + 1, rng.randrange(1 << 40)])
        cur, r = plancore.Cursor(data), ChoiceReader(data)
        for _ in range(3):
            assert cur.draw(lo, hi) == r.draw(lo, hi) and cur.pos == r.pos


def test_plan_loop_makes_sections_without_their_init_as_the_class_makes_them() -> None:
    """The loop makes the scenario and each section (`Program.fields`) with `object.__new__` and a set per
    field: the objects equal what the classes make from the same values, with the same hash, repr and pickle,
    every slot set; a program whose steps are not the class's fields in order calls the class."""
    import pickle
    import random

    from epfuzz.encoding import plancore
    from epfuzz.encoding.codec import _plan_for
    from epfuzz.ir.scenario import Overtake, Scenario

    def programs(p: plancore.Program) -> list[plancore.Program]:
        out = [p]
        for s in p.steps:
            if s.nested is not None:
                out += programs(s.nested)
        return out

    every = programs(_plan_for("dispatch_any", "spec").program())
    assert all(p.fields is not None for p in every)  # the scenario, its sections and overtakes
    rng = random.Random(5)
    for _ in range(40):
        scn = _plan_for("dispatch_any", "spec").program().decode(rng.randbytes(rng.randrange(20, 120)))
        objs = [scn, *[getattr(scn, f.name) for f in dataclasses.fields(Scenario)][2:]]
        objs = [o for o in objs if dataclasses.is_dataclass(o)] + list(scn.schedule)
        for o in objs:
            made = type(o)(*[getattr(o, f.name) for f in dataclasses.fields(o)])
            assert o == made and hash(o) == hash(made) and repr(o) == repr(made)
            assert pickle.loads(pickle.dumps(o)) == made
    # steps by keyword (not the parameters in order): the class's own call
    p = plancore.Program(Overtake, [plancore.Step(plancore.FIXED, "index", fixed=3),
                                    plancore.Step(plancore.FIXED, "stage", fixed="net")], ("index", "stage"),
                         ("stage", "index", "distance"))
    assert p.fields is None and p.decode(b"") == Overtake("net", 3)
