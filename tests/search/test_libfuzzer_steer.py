"""The libFuzzer harness's mutator runs the guided engine's search: its own corpus and scheduler, fed by
what the harness executes, pick the parent; libFuzzer's pick is one more parent; the state is bounded."""

from __future__ import annotations

from pathlib import Path

from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.search import moves as mv
from epfuzz.search.engines import libfuzzer as lf
from epfuzz.search.engines.guided import WARMUP
from epfuzz.search.feedbacks import features


def _recording_move(seen: list[bytes]) -> mv.Move:
    def toy(ctx, data, rng):
        seen.append(data)
        return data + b"\x01"
    return mv.Move("toy", "ir", 1, toy)


def test_fresh_moves_until_the_warmup_is_over():
    steer = lf.Steer()
    for i in range(WARMUP):
        move, parent = steer.choose(b"\x07" * 20, seed=1)
        assert move.kind == "fresh" and parent == b""
        steer.observe(bytes([i]), {("toy", i)}, units=5, violation=False)
    assert len(steer.corpus) == WARMUP


def test_the_parent_comes_from_its_own_corpus_once_it_has_one():
    seen: list[bytes] = []
    steer = lf.Steer([_recording_move(seen)])
    kept = {bytes([i]) * 4 for i in range(40)}
    for i, d in enumerate(sorted(kept)):
        steer.observe(d, {("toy", i)}, units=5, violation=False)
    ctx = mv.Context("deep_gdr", get_protocol("deep_gdr"))
    mutate = lf.mutator(ctx, steer=steer)
    theirs = b"libfuzzer's pick"
    for s in range(200):
        mutate(theirs, 256, s)
    ours = sum(p in kept for p in seen)
    assert ours + seen.count(theirs) == 200
    assert ours > 150 and seen.count(theirs) > 0      # libFuzzer's pick is one more parent, at LIBFUZZER_SHARE


def test_the_mutants_move_is_credited_when_it_runs_and_kept_inputs_name_it():
    seen: list[bytes] = []
    steer = lf.Steer([_recording_move(seen)])
    for i in range(WARMUP):
        steer.observe(bytes([i]), {("toy", i)}, units=5, violation=False)
    out = lf.mutator(mv.Context("deep_gdr", get_protocol("deep_gdr")), steer=steer)(b"", 256, 3)
    assert steer.observe(out, {("toy", "new")}, units=5, violation=False)
    assert steer.corpus.entries[-1].source == "toy"
    assert steer.moves.draws[steer.moves._index["toy"]] == 1
    steer.observe(b"another job's input", {("toy", "other")}, units=5, violation=False)
    assert steer.corpus.entries[-1].source == "libfuzzer"


def test_the_corpus_stays_bounded_and_keeps_every_feature_held():
    steer = lf.Steer(cap=64)
    for i in range(1000):
        steer.observe(i.to_bytes(2, "big"), {("toy", i), ("toy", "shared", i % 7)}, units=1 + i % 9, violation=False)
        assert len(steer.corpus) <= 64
    assert steer.rebuilds > 0
    held = set().union(*(e.feats for e in steer.corpus.entries))
    assert held == steer.corpus.seen
    steer.choose(b"", 1)   # the scheduler works on the rebuilt corpus
    assert steer.scheduler.pick() in steer.corpus.entries


def test_the_harness_feeds_every_execution_to_the_steer(tmp_path: Path):
    from epfuzz.continuous.harness import Harness

    class Plain:   # the features without atheris' counters
        def features(self, run):
            return features(run)

        def emit(self, keys):
            pass

    h = Harness("deep_gdr", keep_going=True, findings_dir=tmp_path)
    h.counters, h.steer = Plain(), lf.Steer()
    ctx = mv.Context("deep_gdr", get_protocol("deep_gdr"))
    mutate = lf.mutator(ctx, steer=h.steer)
    data = b""
    for s in range(60):
        data = mutate(data, 256, s)
        h.test_one_input(data)
    assert h.steer.execs == 60 and len(h.steer.corpus) > 0
    assert all(codec.decode(e.data, "deep_gdr") is not None for e in h.steer.corpus.entries)
