"""Semantic feedback: the features name what an ordering did, and libFuzzer counts them as coverage."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from epfuzz.continuous.seeds import SEED_661
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.search.feedbacks import accept_features, feature_index, features, reads_of, reorder_pairs, role
from epfuzz.sim.engine import simulate

ROOT = Path(__file__).resolve().parents[2]


def _run(doc: dict) -> object:
    scn = codec.load_dict(doc)
    return simulate(scn, get_protocol(scn.protocol))


def test_661_overtake_is_a_reorder_pair_and_a_negative_slack():
    run = _run(SEED_661)
    assert run.violation is not None
    pairs = reorder_pairs(run)
    assert any(k[0] == "ro" and "add/NP_DATA/RO" in k[1] and k[3] == "C2b" for k in pairs), pairs
    slacks = [k for k in accept_features(run) if k[0] == "slack"]
    assert slacks and all(k[-1] < 0 for k in slacks), slacks
    assert ("rf", "data", "poisoned") in accept_features(run) or any(k[:2] == ("rf", "data") for k in
                                                                       accept_features(run))


def test_clean_run_has_progress_transitions_and_nonnegative_slack():
    doc = {**SEED_661, "protocol": "deepep_v2_dispatch_fixed", "preset": "spec", "schedule": [],
           "payload": {"hidden_bytes": 7168, "num_tokens": 3}, "topology": {"num_channels": 2}}
    run = _run(doc)
    assert run.violation is None
    f = accept_features(run)
    assert ("rf", "fresh") in f
    assert any(k[0] == "st" for k in f)
    assert all(k[-1] >= 0 for k in f if k[0] == "slack")
    assert not reorder_pairs(run)



def test_progress_features_name_one_channel_step_not_every_channels_state():
    """With C channels the tuple of every channel's progress had 3^C values; a step is now
    (epoch, before, after, the set of states the others are in): at most 3 * 7 per epoch."""
    doc = {**SEED_661, "protocol": "deepep_v2_dispatch_fixed", "preset": "spec", "schedule": [],
           "payload": {"hidden_bytes": 7168, "num_tokens": 3}, "topology": {"num_channels": 6}}
    st = [k for k in accept_features(_run(doc)) if k[0] == "st"]
    assert st and all(len(k) == 5 and k[2] != k[3] and set(k[4]) <= {0, 1, 2} for k in st), st
    assert len(st) <= 3 * 7

def test_slack_bucket_shrinks_as_the_signal_moves_closer_to_the_data():
    """The signal overtaking fewer data TLPs than needed to go stale: a smaller slack bucket (IJON max)."""
    base = {**SEED_661, "protocol": "deepep_v2_dispatch_fixed", "preset": "spec", "schedule": []}
    far = {k[1:] for k in accept_features(_run(base)) if k[0] == "slack"}
    assert far
    # the feature keys are stable across processes (CRC32, not hash())
    assert feature_index(("slack", 0, "final", 3)) == feature_index(("slack", 0, "final", 3))


def test_the_roles_come_from_what_the_receiver_read_and_watched():
    """No slot-trailer class: the parts of a range the receiver accepted (head, tail, middle, and of a
    slot inside it), the TLP that woke an accepting poll, and what lands where it watches."""
    from epfuzz.search.sampler import SamplerSearch

    proto = get_protocol("deep_gdr")
    s = SamplerSearch("deep_gdr", proto, 1)
    for _ in range(3000):
        run = simulate(s.next_scenario(), proto)
        if run.violation is not None:
            break
    assert run.violation is not None
    pairs = reorder_pairs(run)
    assert not any("data-end" in k[1] for k in pairs)
    assert any(k[1].startswith("read-") or k[2].startswith("read-") for k in pairs if k[0] == "ro"), pairs
    reads = reads_of(run)
    assert reads.triggers and reads.watched
    woke = next(t for t in run.tlps if t.seq in reads.triggers)
    assert role(woke, reads, run.layout.token_bytes).startswith("trigger/")
    assert features(run) >= pairs


TARGET = textwrap.dedent("""
    import sys
    import atheris
    from epfuzz.search.feedbacks import Counters
    counters = Counters(64) if sys.argv.pop(1) == "on" else None
    def target(data):
        if counters is not None and data:
            counters.emit([("test", data[0] % 32)])
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()
""")


def _coverage(tmp: Path, mode: str) -> tuple[int, int]:
    script = tmp / "t.py"
    script.write_text(TARGET)
    p = subprocess.run([sys.executable, str(script), mode, "-runs=3000", "-seed=1"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert "Done 3000 runs" in p.stderr, p.stderr[-2000:]
    m = re.findall(r"cov: (\d+) ft: (\d+)", p.stderr)
    return (int(m[-1][0]), int(m[-1][1])) if m else (0, 0)   # nothing instrumented: libFuzzer prints no cov


def test_semantic_features_raise_libfuzzer_coverage(tmp_path):
    off_cov, off_ft = _coverage(tmp_path, "off")
    on_cov, on_ft = _coverage(tmp_path, "on")
    assert on_cov >= off_cov + 16, (off_cov, on_cov)
    assert on_ft >= off_ft + 16, (off_ft, on_ft)


def test_shape_waypoints_mark_the_remainder_corner():
    """A channel's partial last batch (7 tokens, interval 6) is finished by a WRITE flag: a new waypoint."""
    base = {"protocol": "deep_remainder_flag", "topology": {"num_channels": 1}}
    corner = _run({**base, "payload": {"num_tokens": 7}})
    plain = _run({**base, "payload": {"num_tokens": 6}})
    flag = ("wr", "WriteValue", "signal", "data-qp")
    assert flag in features(corner) and flag not in features(plain)
    assert ("epochs", 0) in features(plain)


def test_a_signal_passing_the_reset_of_its_own_word_is_a_same_bytes_pair():
    """deep_reset_race, minimized: the empty channel's READ and ADD both pass the reset store of their word."""
    doc = {"protocol": "deep_reset_race", "knobs": {"reorder_window": 6},
           "schedule": [{"stage": "pcie", "index": 131, "distance": 5}, {"stage": "pcie", "index": 132, "distance": 5}],
           "topology": {"num_channels": 4, "num_qps": 4}, "chunking": {"splits_per_token": 2},
           "payload": {"epochs": 2, "num_tokens": 1}}
    run = _run(doc)
    assert run.violation is not None and run.violation.kind == "hang"
    same = {k for k in reorder_pairs(run) if k[-1] is True}
    assert any("/read/" in f"/{k[1]}" and k[2] == "local" for k in same), same
    assert ("empty-channel", 1) in features(run)
    clean = _run({**doc, "schedule": []})
    assert not any(k[-1] is True for k in reorder_pairs(clean))


# the features as first written (48379fc), kept as their specification: the loops in epfuzz.search.feedbacks
# were rewritten for speed and must compute exactly these sets
def _spec_landings(run):
    out = {}
    pos = 0
    for t in run.order:
        pos += t.n
        out.setdefault((t.epoch, t.region), []).append((t.off, t.off + max(t.length, 1), pos))
    return out


def _spec_part(lo, hi, a, b):
    head, tail = lo <= a < hi, lo < b <= hi
    return "whole" if head and tail else "head" if head else "tail" if tail else "mid"


def _spec_accept(run):
    from epfuzz.ir import ops
    from epfuzz.search.feedbacks import _bucket, _progress

    lay = run.layout
    tb = lay.token_bytes or 16
    land = _spec_landings(run)
    out, best, done = set(), {}, {}
    for p in run.polls:
        e = p.epoch
        before = tuple(_progress(done.get((e, c), 0), lay.tokens_in_channel[c]) for c in range(lay.num_channels))
        for c in p.consumes:
            a, b = c.offset, c.offset + max(c.length, 1)
            last = {}
            for lo, hi, pos in land.get((e, c.region), ()):
                if lo < b and a < hi:
                    part = _spec_part(lo, hi, a, b)
                    for q in (("head", "tail") if part == "whole" else (part,)):
                        last[q] = max(last.get(q, 0), pos)
            end = (c.offset + c.length) // tb - c.channel * lay.slots_per_channel
            final = c.region == ops.DATA and end >= lay.tokens_in_channel[c.channel]
            phase = (min(e, 3), "final" if final else "batch", c.region)
            for q, pos in last.items():
                key = (*phase, q)
                best[key] = min(best.get(key, p.position - pos), p.position - pos)
            if c.region == ops.DATA:
                done[(e, c.channel)] = done.get((e, c.channel), 0) + c.length // tb
        after = tuple(_progress(done.get((e, c), 0), lay.tokens_in_channel[c]) for c in range(lay.num_channels))
        for ch, (b, a) in enumerate(zip(before, after)):
            if b != a:
                out.add(("st", min(e, 3), b, a, tuple(sorted({x for k, x in enumerate(after) if k != ch}))))
    for key, slack in best.items():
        out.add(("slack", *key, _bucket(slack)))
    v = run.violation
    if v is not None and v.kind != "hang":
        classes = {cls for _, cls in v.bad_chunks}
        out.add(("rf", v.region, "mix" if v.bad_bytes < v.length or len(classes) > 1 else next(iter(classes), "?")))
    elif run.polls:
        out.add(("rf", "fresh"))
    return out


def _spec_shape(run):
    from epfuzz.ir import ops

    data_qps = {}
    for w in run.wrs:
        if getattr(w.op, "region", None) == ops.DATA:
            data_qps.setdefault(w.channel, set()).add(w.qp)
    out = {("wr", type(w.op).__name__, getattr(w.op, "region", "-"),
            "data-qp" if w.qp in data_qps.get(w.channel, ()) else "other-qp") for w in run.wrs}
    epochs = min(max((w.epoch for w in run.wrs), default=0), 3)
    out.add(("epochs", epochs))
    if 0 in run.layout.tokens_in_channel:
        out.add(("empty-channel", epochs))
    return out


def test_the_features_loops_compute_what_their_specification_does():
    """On the guided engine's own runs (deep, deep2, zoo, NVLink, receiver-cache protocols: polls, splits,
    several epochs, violations), the rewritten loops give the specification's sets; the shape of a form,
    read once, comes back as a fresh set each time (a caller may change it)."""
    from epfuzz.search.engines.guided import Guided
    from epfuzz.search.feedbacks import _landings, shape_features

    checked = 0
    for name in ("deep_other_qp", "deep2_cqe_packets", "dispatch_any", "mixed_plane", "stale_cache"):
        loop = Guided(name, get_protocol(name), 9)
        for _ in range(150):
            run = loop.step().run
            assert _landings(run) == _spec_landings(run)
            assert accept_features(run) == _spec_accept(run), name
            got = shape_features(run)
            assert got == _spec_shape(run), name
            got.add(("x",))
            assert shape_features(run) == _spec_shape(run)
            checked += bool(run.polls)
    assert checked > 300


def test_emit_bumps_each_keys_counter_as_its_index_says(monkeypatch):
    """`Counters.emit` keeps each key's counter (a key's `repr` per emit cost ~8% of the harness's execution):
    every emit bumps `feature_index(key) % size` of each key, in the keys' order, across runs and past a full
    memo (cleared). atheris' trace is stood in for by a recorder."""
    import random

    from epfuzz.search import feedbacks as fb

    bumped: list[int] = []

    class Trace:
        @staticmethod
        def _trace_branch(counter: int) -> None:
            bumped.append(counter)

    counters = fb.Counters(512)
    counters._atheris = Trace
    monkeypatch.setattr(fb, "INDEXED", 40)
    proto = get_protocol("deep_ro_signal")
    rng = random.Random(5)
    for _ in range(60):
        run = simulate(codec.decode(bytes(rng.randrange(256) for _ in range(rng.randrange(96))), "deep_ro_signal"),
                       proto)
        keys = list(features(run))
        bumped.clear()
        counters.emit(keys)
        assert bumped == [counters.base[feature_index(k) % 512] for k in keys]
        assert len(counters._index) <= 40
