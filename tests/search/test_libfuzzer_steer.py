"""The libFuzzer harness's mutator runs the guided engine's search: the engine (its corpus, scheduler and
move weights), fed by what the harness executes, draws the move and the parent; libFuzzer's pick is one
more parent; the state is bounded."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.search import moves as mv
from epfuzz.search.engines import libfuzzer as lf
from epfuzz.search.engines.guided import WARMUP
from epfuzz.search.feedbacks import features

RUN = SimpleNamespace(order=[SimpleNamespace(n=5)], violation=None)   # what try_input reads of a run


def _steer(moves=mv.DEFAULT, cap=lf.Steer.CAP) -> lf.Steer:
    return lf.Steer("deep_gdr", get_protocol("deep_gdr"), moves=moves, cap=cap)


def _recording_move(seen: list[bytes]) -> mv.Move:
    def toy(ctx, data, rng):
        seen.append(data)
        return data + b"\x01"
    return mv.Move("toy", "ir", 1, toy)


def test_fresh_moves_until_the_warmup_is_over():
    steer = _steer()
    for i in range(WARMUP):
        out, move = steer.next_input(b"\x07" * 20, 256, seed=1)
        assert move in ("fresh", "fresh+pct")
        steer.made(out, move)
        steer.observe(out, RUN, {("toy", i)})
    assert len(steer.corpus) == WARMUP and steer.execs == WARMUP


def test_the_parent_comes_from_its_own_corpus_once_it_has_one():
    seen: list[bytes] = []
    steer = _steer([_recording_move(seen)])
    kept = {bytes([i]) * 4 for i in range(40)}
    for i, d in enumerate(sorted(kept)):
        steer.observe(d, RUN, {("toy", i)})
    mutate = lf.mutator(mv.Context("deep_gdr", get_protocol("deep_gdr")), steer=steer)
    theirs = b"libfuzzer's pick"
    for s in range(200):
        mutate(theirs, 256, s)
    ours = sum(p in kept for p in seen)
    assert ours + seen.count(theirs) == 200
    assert ours > 150 and seen.count(theirs) > 0      # libFuzzer's pick is one more parent, at LIBFUZZER_SHARE


def test_the_mutants_move_is_credited_when_it_runs_and_kept_inputs_name_it():
    seen: list[bytes] = []
    steer = _steer([_recording_move(seen)])
    for i in range(WARMUP):
        steer.observe(bytes([i]), RUN, {("toy", i)})
    out = lf.mutator(mv.Context("deep_gdr", get_protocol("deep_gdr")), steer=steer)(b"", 256, 3)
    assert steer.observe(out, RUN, {("toy", "new")})
    assert steer.corpus.entries[-1].source == "toy"
    assert steer.moves.draws[0] == 1
    steer.observe(b"another job's input", RUN, {("toy", "other")})
    assert steer.corpus.entries[-1].source == "libfuzzer"


def test_the_corpus_stays_bounded_and_its_holders_run_again():
    steer = _steer(cap=64)
    weights = steer.moves
    for i in range(1000):
        d = i.to_bytes(2, "big")
        steer.observe(d, RUN, {("toy", i), ("toy", "shared", i % 7)})
        assert len(steer.corpus) <= 64
    assert steer.restarts > 0 and steer.moves is weights and steer.execs == 1000
    assert 0 < len(steer.replay) <= 32
    queued = list(reversed(steer.replay))
    for d in queued:   # the next mutants are the holders, which rebuild the corpus as they run
        out, move = steer.next_input(b"", 256, 1)
        assert (out, move) == (d, "replay")
        steer.made(out, move)
        steer.observe(out, RUN, {("toy", int.from_bytes(out, "big"))})
    assert not steer.replay and set(queued) <= {e.data for e in steer.corpus.entries}
    assert steer.next_input(b"", 256, 1)[1] != "replay"


def test_a_move_that_raises_is_named_and_replaced_by_a_byte_edit(capsys, monkeypatch):
    from epfuzz.protocols import REGISTRY

    def broken(ctx, data, rng):
        raise TypeError("a bug in this move")

    monkeypatch.setattr(REGISTRY, "where", lambda e: "")
    steer = _steer([mv.Move("broken", "fresh", 1, broken)])
    mutate = lf.mutator(mv.Context("deep_gdr", get_protocol("deep_gdr")), steer=steer)
    assert all(isinstance(mutate(b"abc", 64, s), bytes) for s in range(3))
    assert capsys.readouterr().err.count("epfuzz: move broken raised TypeError") == 1


def test_the_harness_feeds_every_execution_to_the_steer(tmp_path: Path):
    from epfuzz.continuous.harness import Harness

    class Plain:   # the features without atheris' counters
        def features(self, run):
            return features(run)

        def emit(self, keys):
            pass

    h = Harness("deep_gdr", keep_going=True, findings_dir=tmp_path)
    h.counters, h.steer = Plain(), _steer()
    mutate = lf.mutator(mv.Context("deep_gdr", get_protocol("deep_gdr")), steer=h.steer)
    data = b""
    for s in range(60):
        data = mutate(data, 256, s)
        h.test_one_input(data)
    assert h.steer.execs == 60 and len(h.steer.corpus) > 0
    assert {e.source for e in h.steer.corpus.entries} <= {m.name for m in mv.DEFAULT}
    assert all(codec.decode(e.data, "deep_gdr") is not None for e in h.steer.corpus.entries)


def test_with_no_parent_from_libfuzzer_the_mutants_are_the_guided_engines_step_for_step():
    """The harness runs the guided engine's search, not a copy of it: fed the same executions from the
    same seed, the mutator returns the inputs Guided.step would run (past the warm-up, through kept
    inputs and schedule moves), so a change to the engine is a change to the harness."""
    from epfuzz.search.engines.guided import Guided
    from epfuzz.sim.engine import simulate

    name = "deep_gdr"
    proto = get_protocol(name)
    g = Guided(name, proto, 5)
    steer = lf.Steer(name, proto)
    steer.guided.rng.seed(5)
    steer.seeded = True
    mutate = lf.mutator(mv.Context(name, proto), steer=steer)
    for i in range(2 * WARMUP + 40):
        step = g.step()
        data = mutate(b"", 256, 0)
        assert data == step.data, i
        run = simulate(codec.decode(data, name), proto)
        assert steer.observe(data, run, features(run)) == step.kept, i
    assert len(steer.corpus) == len(g.corpus) > 1
    assert {e.source for e in steer.corpus.entries} == {e.source for e in g.corpus.entries}
