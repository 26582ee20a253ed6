"""Issue 18.5: 1-minimality covers schedules: in a minimized case, removing any one overtake
loses the finding, and so does removing any two (an overtake, its undo and the overtake again:
dropping any single one of the three leaves the identity order, so only a pair removal shrinks it)."""

from __future__ import annotations

import json
import random
from itertools import combinations
from pathlib import Path

import pytest

from epfuzz.backends.sim import SimBackend
from epfuzz.encoding import codec
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.triage.minimize import minimize

CASE = json.loads(Path("corpus/regressions/deepep661-c2b.json").read_text())["scenario"]
SIM = SimBackend()


def _reproduces_without(doc: dict, drop: tuple[int, ...], kind: str) -> bool:
    less = json.loads(json.dumps(doc))
    less["schedule"] = [e for i, e in enumerate(less["schedule"]) if i not in drop]
    out = SIM.run(codec.load_dict(less), get_protocol(doc["protocol"]))
    return out.violation is not None and out.violation.kind == kind


def _assert_every_overtake_needed(result: Scenario, kind: str) -> None:
    doc = result.to_dict()
    n = len(doc["schedule"])
    for k in (1, 2):
        for drop in combinations(range(n), k):
            assert not _reproduces_without(doc, drop, kind), (drop, doc["schedule"])


def test_swap_undo_swap_shrinks_to_one_overtake_and_each_is_needed():
    d = json.loads(json.dumps(CASE))
    swap = {"stage": "pcie", "index": 15, "distance": 16}
    d["schedule"] = [swap, {"stage": "pcie", "index": 15, "distance": 1}, swap]
    proto = get_protocol(d["protocol"])
    scn = codec.load_dict(d)
    assert SIM.run(scn, proto).violation is not None
    result = minimize(scn, proto).result
    assert len(result.schedule) == 1, result.schedule
    _assert_every_overtake_needed(result, "stale-accept")


#: a minimized dispatch_any finding (spec preset, RO write signal, one 16-byte token): one adjacent
#: swap of the data TLP and the signal TLP makes it
ADJACENT = {'protocol': 'dispatch_any',
    'preset': 'spec',
    'knobs': {'mr_relaxed': True,
             'nic_relaxed_ordering': True,
             'atomic_mode': 0,
             'adaptive_routing': False,
             'hca_o920': False,
             'ido': False,
             'num_functions': 1,
             'reorder_window': 1},
    'signal': {'kind': 'write',
              'interval': 1,
              'at_end_only': False,
              'other_qp': False,
              'fence': False,
              'encoding': 'pack2'},
    'chunking': {'tokens_per_wr': 1, 'splits_per_token': 1, 'mtu': 4096, 'max_payload': 4096},
    'payload': {'hidden_bytes': 16, 'scale_bytes': 0, 'meta_bytes': 16, 'epochs': 1, 'num_tokens': 1}}


def test_adjacent_swap_three_times_shrinks_to_one():
    """Found by fuzzing (56 of 400 minimized findings before the fix kept this shape): three
    copies of one adjacent swap; no single removal reproduces, the pair removal does."""
    one = {"stage": "pcie", "index": 1, "distance": 1}
    d = {**json.loads(json.dumps(ADJACENT)), "schedule": [one, one, one]}
    proto = get_protocol(d["protocol"])
    scn = codec.load_dict(d)
    out = SIM.run(scn, proto)
    assert out.violation is not None
    for drop in range(3):  # the shape that single removals cannot shrink
        assert not _reproduces_without(d, (drop,), out.violation.kind)
    result = minimize(scn, proto).result
    assert len(result.schedule) == 1, result.schedule
    _assert_every_overtake_needed(result, out.violation.kind)


def _random_findings(count: int, seed: int):
    rng = random.Random(seed)
    names = [n for n in BUILTIN if not n.endswith("_fixed")]
    while count:
        name = rng.choice(names)
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(8, 80)))
        scn = codec.decode(data, protocol=name)
        if len(scn.schedule) < 2:
            continue
        out = SIM.run(scn, get_protocol(name))
        if out.violation is None:
            continue
        count -= 1
        yield scn, out.violation.kind


@pytest.mark.parametrize("seed", [1, 2])
def test_minimized_random_findings_need_every_overtake(seed):
    for scn, kind in _random_findings(40, seed):
        m = minimize(scn, get_protocol(scn.protocol))
        assert m.complete
        _assert_every_overtake_needed(m.result, kind)


def test_budget_stop_is_not_called_complete():
    d = json.loads(json.dumps(CASE))
    scn = codec.load_dict(d)
    proto = get_protocol(d["protocol"])
    assert not minimize(scn, proto, max_runs=1).complete
    assert minimize(scn, proto).complete
