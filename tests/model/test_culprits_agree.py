"""Issue 18.4: the cells a run reports are exactly those its trace used, and run, signature and
explain agree on them, over random small scenarios of every protocol family.

Before the fix a later overtake that split a run an earlier one had passed dropped the earlier
pass from the record: the trace held an inversion no cell accounted for.
"""

from __future__ import annotations

import random

import pytest

from epfuzz.backends.sim import SimBackend
from epfuzz.encoding import codec
from epfuzz.ir.presets import PRESETS
from epfuzz.protocols import REGISTRY
from epfuzz.sim.engine import build, replay
from epfuzz.sim.nvlink import is_nvlink, pass_rule
from epfuzz.sim.pass_rules import packet_pass_rule
from epfuzz.triage.explain import explain, overtake_lines
from epfuzz.triage.findings import signature

PER_FAMILY = 2000
#: a family: a bug-zoo pattern (its buggy and fixed protocols), or a protocol outside the zoo
FAMILIES: dict[str, list[str]] = {}
for _name, _p in REGISTRY.items.items():
    if ":" in _name:
        continue
    FAMILIES.setdefault(f"pattern-{_p.pattern.number}" if _p.pattern else _name, []).append(_name)


def _trace_inversions(order: list) -> set[tuple[int, int]]:
    """(later, earlier) pieces the final order shows inverted: what the trace used."""
    out = set()
    for i, x in enumerate(order):
        for y in order[i + 1:]:
            if x.seq > y.seq:
                out.add((id(x), id(y)))
    return out


def _check_record(order: list, record: list, rule) -> None:
    assert {(id(a), id(b)) for a, b, _ in record} == _trace_inversions(order)
    for a, b, r in record:
        assert rule(a, b) == r, (a, b, r)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_reported_cells_are_the_traces(family):
    rng = random.Random(family)
    presets = sorted(PRESETS)
    pkt_rule = packet_pass_rule(True)
    sim = SimBackend()
    explained = 0
    for k in range(PER_FAMILY):
        name = FAMILIES[family][k % len(FAMILIES[family])]
        proto = REGISTRY.items[name]
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 72)))
        scn = codec.decode(data, name, presets[k % len(presets)])
        run = build(scn, proto)
        _check_record(run.order, run.tlp_inversions, pass_rule(scn, run.packets, run.wrs))  # the rule the run used
        if not is_nvlink(scn):  # under nvlink packets are GPU stores in issue order: no network adversary
            _check_record(run.packets, run.packet_inversions, pkt_rule)
        replay(run, proto)
        if run.violation is None:
            continue
        culprits = run.culprit_rules()
        assert culprits <= run.rules_fired
        out = sim.run(scn, proto)
        assert out.rules_fired == culprits
        sig_cells = signature(scn, out, proto).split("|")[3]
        assert sig_cells == ("+".join(sorted(culprits)) or "in-order")
        depends = out.summary.splitlines()[-1].removeprefix("the finding depends on: ")
        assert depends == (", ".join(sorted(culprits)) or "arrival order alone")
        cells = {line.split(":", 1)[0] for line in overtake_lines(run)}
        assert culprits <= cells, (culprits, cells)
        if explained < 2 and len(run.order) < 40:  # the full explanation (exhaustive knob flips) on a few
            explained += 1
            text = explain(scn, proto).text()
            overtakes = text.split("\novertakes\n", 1)[1].split("\n\n", 1)[0]
            assert {c for c in culprits if f"  {c}: " not in overtakes} == set(), text
