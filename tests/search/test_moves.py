"""The move registry: every move makes an input the codec reads back, the harness draws the same set."""

from __future__ import annotations

import random

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.scenario import Overtake
from epfuzz.protocols import get_protocol
from epfuzz.search import context
from epfuzz.search import moves as mv
from epfuzz.search.engines.libfuzzer import mutator


def _ctx(name: str = "deep_gdr") -> mv.Context:
    return mv.Context(name, get_protocol(name))


def test_every_move_gives_bytes_that_decode_and_encode_back():
    ctx, rng = _ctx(), random.Random(5)
    parent = codec.encode(codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": 3}}))
    for m in mv.DEFAULT:
        for _ in range(20):
            out = m.fn(ctx, parent, rng)
            assert isinstance(out, bytes) and len(out) <= mv.MAX_LEN, m.name
            scn = ctx.decode(out)
            assert codec.decode(codec.encode(scn), "deep_gdr") == scn, m.name


def test_shift_keeps_an_index_at_the_codecs_bound_encodable():
    """Issue 34.1: index 65535 nudged up is 65537, which codec.encode refused."""
    ctx = _ctx()
    scn = ctx.decode(b"").replace(schedule=(Overtake("pcie", 65535, 1),))
    for seed in range(200):
        out = ctx.decode(mv.shift(ctx, codec.encode(scn), random.Random(seed)))
        assert all(0 <= o.index <= 65535 for o in out.schedule)


def test_the_libfuzzer_mutator_draws_from_the_same_registry():
    ctx = _ctx()
    toy_used = []

    def toy(ctx, data, rng):
        toy_used.append(data)
        return data + b"\x01"

    mutate = mutator(ctx, [mv.Move("toy", "ir", 1000, toy)])
    data = codec.encode(ctx.decode(b"\x05" * 40))
    assert mutate(data, 256, 1) == data + b"\x01" and toy_used
    full = mutator(ctx)
    for seed in range(30):
        assert len(full(data, 64, seed)) <= 64


def test_without_the_emulator_no_schedule_move_is_drawn():
    s = mv.MoveSet(sim=False)
    assert {m.kind for m in s.moves} == {"fresh", "ir", "bytes"}


def test_adaptive_weights_follow_the_moves_that_pay_within_their_spread():
    """MOpt-style: a move whose inputs are kept gains draws, one that never pays loses them, and
    neither leaves [base / SPREAD, base * SPREAD]; a set built without `adapt` keeps its weights."""
    s = mv.MoveSet(adapt=True)
    for _ in range(4 * mv.PERIOD):
        for m in s.moves:
            s.reward(m.name, m.name == "extend")
    w = s.weights
    base = {m.name: m.weight for m in mv.DEFAULT}
    assert w["extend"] > base["extend"] and w["fresh"] < base["fresh"]
    assert all(base[k] / mv.SPREAD - 1e-9 <= v <= base[k] * mv.SPREAD + 1e-9 for k, v in w.items())
    fixed = mv.MoveSet()
    for _ in range(2 * mv.PERIOD):
        fixed.reward("extend", True)
    assert fixed.weights == base


def test_without_a_parent_the_draw_is_among_the_fresh_moves_by_weight():
    s, rng = mv.MoveSet(), random.Random(3)
    got = {s.draw(rng, have_parent=False).name for _ in range(200)}
    assert got == {"fresh", "fresh+pct"}


def test_the_libfuzzer_mutator_says_once_when_a_move_raises(capsys, monkeypatch):
    """A move's exception falls back to a byte edit (the fuzzer must go on) but is no longer silent;
    the plug-in's own exception (one REGISTRY.where places in plug-in code) stays unsaid: its input
    shows it when it runs."""
    from epfuzz.protocols import REGISTRY, get_protocol
    from epfuzz.search import moves as mv
    from epfuzz.search.engines.libfuzzer import mutator

    def broken(ctx, data, rng):
        raise TypeError("a bug in this move")

    # this file may count as plug-in code in a suite where an earlier test loaded tests.* as a plug-in
    monkeypatch.setattr(REGISTRY, "where", lambda e: "")
    mutate = mutator(mv.Context("deep_gdr", get_protocol("deep_gdr")), [mv.Move("broken", "ir", 1, broken)])
    outs = [mutate(bytes(range(32)), 64, s) for s in range(3)]
    assert all(isinstance(o, bytes) and len(o) <= 64 for o in outs)
    err = capsys.readouterr().err
    assert err.count("epfuzz: move broken raised TypeError: a bug in this move") == 1, err
    monkeypatch.setattr(REGISTRY, "where", lambda e: " (at plugin.py:1, in broken)")
    mutate = mutator(mv.Context("deep_gdr", get_protocol("deep_gdr")), [mv.Move("broken", "ir", 1, broken)])
    assert isinstance(mutate(bytes(range(32)), 64, 0), bytes) and capsys.readouterr().err == ""


def test_the_runs_kept_for_schedule_moves_are_a_bounded_lru(monkeypatch):
    """A long run's memory must not grow with its corpus: at most BASES configurations' runs are kept,
    the least recently used leaves first, and a kept run holds no epoch-start images."""
    monkeypatch.setattr(context, "BASES", 3)
    ctx = _ctx()
    configs = [codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": n}}) for n in range(1, 6)]
    for c in configs[:3]:
        ctx.base(c)
    ctx.base(configs[0])                      # used again: the most recent
    ctx.base(configs[3])                      # the fourth: configs[1], least recently used, leaves
    assert list(ctx.bases) == [configs[2], configs[0], configs[3]]
    assert ctx.base_runs == 4
    ctx.base(configs[0])
    assert ctx.base_runs == 4                 # kept: not run again
    for c in configs:
        ctx.base(c)
    assert len(ctx.bases) == 3
    assert all(run.starts is None for run in ctx.bases.values())


def test_a_schedule_move_hands_its_parents_form_back_to_the_cache(monkeypatch):
    """Fresh inputs and IR mutants push a parent's built form out of the emulator's form cache; a schedule
    move on it (its base run kept) puts the form back, so its mutant runs without a build (issue 27: the
    per-execution cost grew with the corpus through these builds), and the forms kept beside the base
    runs leave with them."""
    from epfuzz.sim import engine

    monkeypatch.setattr(context, "BASES", 2)
    monkeypatch.setattr(engine, "FORMS", engine.FormCache(maxsize=2, keep_first=False))  # as the process's
    ctx, rng = _ctx(), random.Random(3)
    parent = codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": 3}})
    ctx.base(parent)
    for n in (4, 5):                                       # two other configurations fill the cache
        engine.simulate(codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": n}}), ctx.proto)
    child = ctx.decode(mv.extend(ctx, codec.encode(parent), rng))
    assert ctx.base_runs == 1 and child.replace(schedule=()) == parent
    misses = engine.FORMS.misses
    engine.simulate(child, ctx.proto)
    assert engine.FORMS.misses == misses                   # the child ran over the parent's form
    for n in (6, 7):
        ctx.base(codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": n}}))
    assert set(ctx.forms) == set(ctx.bases) and len(ctx.forms) == 2


def test_a_fresh_sampled_draw_runs_nothing_and_keeps_no_run():
    """fresh+pct is the sampler baseline's draw: its schedule comes from the configuration's built form,
    so it neither replays the configuration (a second execution per draw) nor pushes the parents' runs
    out of the schedule moves' LRU."""
    ctx, rng = _ctx(), random.Random(2)
    outs = [mv.fresh_pct(ctx, b"", rng) for _ in range(30)]
    assert ctx.base_runs == 0 and not ctx.bases
    assert any(ctx.decode(o).schedule for o in outs)


def test_a_fresh_sampled_draw_whose_build_raises_names_its_configuration(monkeypatch):
    """The plug-in's sender runs in fresh+pct's build: where it raises, the campaign keeps
    `ctx.culprit(parent)`, which must be that configuration, not the fresh move's empty parent."""
    from epfuzz.sim import engine

    class Raising:   # the form cache whose build runs the sender (a stand-in: compiled, its methods are fixed)
        def get(self, scn, proto):
            raise RuntimeError("sender")

    monkeypatch.setattr(engine, "FORMS", Raising())
    ctx = _ctx()
    with pytest.raises(RuntimeError):
        mv.fresh_pct(ctx, b"", random.Random(4))
    assert ctx.running is not None
    assert ctx.decode(ctx.culprit(b"")) == ctx.running


@pytest.mark.parametrize("name", ["deep_gdr", "deep_other_qp", "dispatch_any", "mixed_plane", "deep2_packed"])
def test_a_moves_handed_scenario_is_what_its_bytes_decode_to(name):
    """The guided engine runs the scenario a move hands along (`Context.emit`) instead of decoding the
    move's bytes: that is only right while `decode(encode(s)) == s` holds for every scenario a built-in
    move makes (a decoded configuration, a schedule within the codec's bounds), on any parent: random
    bytes, parents with long schedules (extend keeps up to MAX_SCHEDULE - 2 of them), net overtakes."""
    ctx, rng = _ctx(name), random.Random(11)
    handed = {m.name: 0 for m in mv.DEFAULT}
    parents = [rng.randbytes(rng.randrange(0, 129)) for _ in range(12)]
    for p in list(parents):        # parents whose schedules are long, as extend's grow them
        for _ in range(8):
            p = mv.extend(ctx, p, rng)
        parents.append(p)
    for parent in parents:
        for m in mv.DEFAULT:
            ctx.made = None
            out = m.fn(ctx, parent, rng)
            if ctx.made is None:
                continue
            handed[m.name] += 1
            assert ctx.made[0] is out, m.name
            assert codec.decode(out, name) == ctx.made[1], m.name
    assert all(handed[n] for n in ("fresh+pct", "extend", "resample", "shift")), handed
    assert not any(handed[n] for n in ("fresh", "field", "shrink", "suffix", "bytes")), handed


def test_decoded_parents_are_a_bounded_lru(monkeypatch):
    """`Context.decode` keeps at most DECODED scenarios (a long run's memory must not grow with its
    corpus), the least recently used leaves first, and what it returns is what the codec decodes."""
    monkeypatch.setattr(context, "DECODED", 3)
    ctx = _ctx()
    inputs = [bytes([i]) * 9 for i in range(5)]
    for d in inputs[:3]:
        assert ctx.decode(d) == codec.decode(d, "deep_gdr")
    ctx.decode(inputs[0])                      # used again: the most recent
    ctx.decode(inputs[3])                      # inputs[1], least recently used, leaves
    assert list(ctx.decoded) == [inputs[2], inputs[0], inputs[3]]
    assert ctx.decode(inputs[0]) is ctx.decoded[inputs[0]]


def test_the_guided_engine_decodes_no_input_a_move_built_from_a_scenario(monkeypatch):
    """Schedule moves and fresh+pct hand their scenario along; the executor decodes only the bytes of the
    other moves (and seeds), and a kept input's scenario is remembered for its moves as a parent."""
    from epfuzz.search.engines.guided import Guided
    from epfuzz.search.executor import SimExecutor

    decoded: list[bytes] = []
    run = SimExecutor.run

    def counting(self, data):
        decoded.append(data)
        return run(self, data)

    monkeypatch.setattr(SimExecutor, "run", counting)
    loop = Guided("deep_gdr", get_protocol("deep_gdr"), 4)
    steps = [loop.step() for _ in range(300)]
    built = {"fresh+pct", "extend", "resample", "shift"}
    assert sum(s.move in built for s in steps) > 100
    assert len(decoded) == sum(s.move not in built for s in steps)
    for s in steps:
        if s.kept and s.data in loop.ctx.decoded:
            assert loop.ctx.decoded[s.data] == codec.decode(s.data, "deep_gdr")
    assert any(s.kept and s.data in loop.ctx.decoded for s in steps)


def test_schedule_moves_encode_through_cuts_that_equal_a_fresh_split():
    """A schedule move encodes only the mutant's schedule, over its parent's cut (`Context.cuts`); a kept
    mutant gets its parent's cut (`remember`: same configuration). Every cut kept must be what `codec.split`
    makes of its input's scenario, and the bytes what `codec.encode` writes."""
    from epfuzz.protocols.deep import DEEP_ZOO
    from epfuzz.search.engines.guided import Guided

    for bad in (DEEP_ZOO[0][2], "dispatch_any"):
        g = Guided(bad, get_protocol(bad), 3)
        inherited = 0
        for _ in range(300):
            st = g.step()
            if st.kept and st.move in ("extend", "resample", "shift"):
                inherited += st.data in g.ctx.cuts
        assert inherited > 0
        for data, cut in g.ctx.cuts.items():
            scn = codec.decode(data, bad)
            assert cut == codec.split(scn)
            assert codec.encode_split(cut, scn.schedule) == codec.encode(scn)


def test_with_schedule_is_replace():
    """`context.with_schedule` (positional) makes what `Scenario.replace(schedule=...)` makes."""
    rng = random.Random(5)
    for name in ("deep_gdr", "dispatch_any", "mixed_plane"):
        for _ in range(30):
            scn = codec.decode(rng.randbytes(rng.randrange(0, 129)), name)
            sched = codec.decode(rng.randbytes(rng.randrange(0, 60)), name).schedule
            got = context.with_schedule(scn, sched)
            assert got == scn.replace(schedule=sched) and type(got) is type(scn)
            assert all(getattr(got, f) is getattr(scn, f) for f in context._FIELDS if f != "schedule")


def test_a_configuration_found_by_identity_is_the_one_found_by_value(monkeypatch):
    """`Context.base` and `marked` find a configuration object seen before by its identity (`hot`), without
    hashing it: the run, form and marks must be those a lookup by value gives, its use must keep `bases`'
    LRU order as one by value did, and a record whose base left `bases` must not stop it running again."""
    monkeypatch.setattr(context, "BASES", 2)
    ctx = _ctx()
    a, b, c = (codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": n}}) for n in (2, 3, 4))
    run = ctx.base(a)
    marks = ctx.marked(a, run)
    twin = codec.load_dict(a.to_dict())                 # equal, another object: found by value
    assert twin == a and twin is not a
    assert ctx.base(twin) is run and ctx.marked(twin, run) is marks and ctx.last_form is ctx.forms[a]
    ctx.base(b)
    assert ctx.base(a) is run and ctx.marked(a, run) is marks and ctx.last_form is ctx.forms[a]
    assert list(ctx.bases) == [b, a] and ctx.base_runs == 2
    ctx.base(c)                                         # b leaves
    assert list(ctx.bases) == [a, c] and ctx.base_runs == 3
    del ctx.bases[a]                                    # a's base gone, its record not (as after a twin's use)
    assert ctx.hot[id(a)][0] is a
    again = ctx.base(a)
    assert ctx.base_runs == 4 and list(ctx.bases) == [c, a] and again is not run
    assert [t.seq for t in ctx.marked(a, again)] == [t.seq for t in marks]
