"""The guided engine: what it keeps, that a seed fixes it, that it finds deep bugs, and its campaign."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.search.engines.guided import Guided
from epfuzz.search.sampler import sample_schedule

ROOT = Path(__file__).resolve().parents[2]


def _first_find(name: str, seed: int, limit: int) -> int | None:
    loop = Guided(name, get_protocol(name), seed)
    for _ in range(limit):
        if loop.step().run.violation is not None:
            return loop.execs
    return None


def test_keeps_an_input_with_a_new_feature_and_drops_one_without():
    proto = get_protocol("deep_gdr")
    loop = Guided("deep_gdr", proto, 1)
    plain = codec.encode(codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": 2}}))
    assert loop.try_input(plain).kept
    assert not loop.try_input(plain + b"\0").kept        # the same features: dropped
    assert len(loop.corpus) == 1
    # a second call (epoch 1) and its state transitions: new features, kept
    again = codec.encode(codec.load_dict({"protocol": "deep_gdr", "payload": {"num_tokens": 2, "epochs": 2}}))
    assert loop.try_input(again).kept
    assert len(loop.corpus) == 2 and ("epochs", 1) in loop.corpus.seen


def test_a_seed_fixes_the_search():
    def trace(seed: int) -> list[bytes]:
        loop = Guided("deep_remainder_flag", get_protocol("deep_remainder_flag"), seed)
        return [loop.step().data for _ in range(60)]

    assert trace(3) == trace(3)
    assert trace(3) != trace(4)


def test_extend_keeps_the_schedule_it_builds_on():
    proto = get_protocol("deep_ro_signal")
    scn = codec.load_dict({"protocol": "deep_ro_signal", "payload": {"num_tokens": 2}})
    import random

    rng = random.Random(2)
    first = sample_schedule(scn, proto, rng, depth=1)
    more = sample_schedule(scn.replace(schedule=first), proto, rng, depth=1, keep=first, focus=True)
    assert more[:1] == first and len(more) == 2


def test_finds_each_core_deep_bug_from_nothing():
    """The four bugs random needs over 10,000 executions for (docs/zoo.md, the depth table), fixed seeds."""
    for name, limit in (("deep_ro_signal", 1500), ("deep_remainder_flag", 3000), ("deep_notify_qp", 3000)):
        found = _first_find(name, 1, limit)
        assert found is not None, name


def test_finds_the_reset_race_from_nothing():
    assert _first_find("deep_reset_race", 3, 3000) is not None


def test_fixed_forms_stay_clean():
    for name in ("deep_ro_signal_fixed", "deep_reset_race_fixed"):
        assert _first_find(name, 1, 600) is None, name


def test_guided_campaign_writes_cases_that_replay(tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "epfuzz", "--log-json", "fuzz", "deep_ro_signal",
                        "--time", "600", "--max-execs", "1500", "--seed", "1", "--run-dir", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 1, p.stderr[-2000:]
    assert "bug(s) by root cause" in p.stdout, p.stdout
    cases = sorted(out.glob("finding-*.json"))
    assert cases and (out / "bugs.csv").exists() and (out / "progress.csv").exists()
    assert any((out / "corpus").iterdir())
    case = json.loads(cases[0].read_text())
    assert case["expect"] == "finding"
    r = subprocess.run([sys.executable, "-m", "epfuzz", "run", str(cases[0])], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 1, r.stdout + r.stderr


def test_guided_engine_refuses_what_it_cannot_do():
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "deep_gdr", "--engine", "guided", "--time", "1",
                        "--", "-runs=3"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 2 and "takes no libFuzzer flags" in p.stderr
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "deep_gdr", "--engine", "guided", "--backend", "verbs",
                        "--time", "1"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 2, p.stderr


def test_the_default_engine_on_sim_is_guided_and_a_protocol_runs_by_name(tmp_path):
    """`epfuzz fuzz NAME` with no --engine: guided (its stats.json and feature coverage); a built-in
    protocol runs by its protocol or its harness name."""
    from epfuzz.campaign.guided import _names

    assert _names("deep_gdr", None, "spec") == ("deep_gdr_fuzzer", "deep_gdr")
    assert _names("deep_gdr_fuzzer", None, "spec") == ("deep_gdr_fuzzer", "deep_gdr")
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "deep_ro_signal", "--time", "600", "--max-execs",
                        "200", "--seed", "2", "--run-dir", str(out)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["execs"] == 200 and stats["moves"] and stats["feedbacks"]
    assert not list(out.glob("job*.log"))       # no libFuzzer job


def test_an_overtake_at_the_codecs_bound_stays_encodable_on_a_long_run():
    """Issue 34.1: a plug-in with 48 tokens on one channel, seed 3, an input whose overtakes sit at
    index 65535: the old shift pushed one to 65537 and codec.encode raised after 250 executions."""
    from epfuzz.ir.scenario import Overtake
    from epfuzz.protocols import REGISTRY
    from tests.search.many_tokens import ManyTokens

    spec = "tests.search.many_tokens:ManyTokens"
    REGISTRY.items[spec] = ManyTokens()
    try:
        loop = Guided(spec, REGISTRY.items[spec], 3)
        scn = codec.decode(b"", spec).replace(schedule=(Overtake("pcie", 65535, 1), Overtake("pcie", 65534, 2)))
        assert loop.try_input(codec.encode(scn)).kept
        for _ in range(1000):
            step = loop.step()
            assert all(0 <= o.index <= 65535 for o in step.scenario.schedule)
        assert loop.monitor.moves["shift"].used > 0
    finally:
        REGISTRY.items.pop(spec)



def test_the_first_executions_are_fresh_inputs():
    """WARMUP: the corpus starts from random and sampled inputs (the seeds AFL would be given), so a
    shallow bug is met at random search's rate before any mutant is drawn."""
    from epfuzz.search.engines import guided

    loop = Guided("deep_gdr", get_protocol("deep_gdr"), 4)
    moves = [loop.step().move for _ in range(guided.WARMUP + 200)]
    assert set(moves[:guided.WARMUP]) <= {"fresh", "fresh+pct"}
    assert set(moves[guided.WARMUP:]) - {"fresh", "fresh+pct"}
