"""Issue 26.2: "(minimized)" means 1-minimal at the smallest shape the bug allows. Pinned per zoo bug:
the most epochs, tokens, channels, QPs and TLPs that a minimized case of six seeded random findings
keeps (before re-addressed overtakes, a flag_write_signal case kept 33 tokens and 107 TLPs, a
tutorial case 8 channels and 7 QPs)."""

from __future__ import annotations

import random

import pytest

from epfuzz.backends import get_backend
from epfuzz.encoding import codec
from epfuzz.protocols import get_protocol
from epfuzz.sim.engine import build
from epfuzz.triage.minimize import minimize

#: protocol -> (epochs, tokens, channels, QPs, TLPs) at most, what the bug needs: one token and one
#: overtake for the single-QP reorderings; two epochs where a slot or counter is reused; a second
#: QP for the cross-QP races; the geometry bug needs tokens on three channels
PINNED = {
    "deepep_v2_dispatch": (1, 1, 1, 1, 2),
    "flag_write_signal": (1, 1, 1, 1, 2),
    "inband_tag": (1, 1, 1, 1, 2),
    "flush_other_qp": (1, 1, 1, 2, 3),
    "shared_counter": (1, 3, 2, 2, 9),
    "stale_epoch_counter": (2, 1, 1, 1, 6),
    "signal_reset_race": (2, 1, 2, 2, 8),
    "early_credit_release": (2, 1, 1, 1, 6),
    "gdr_no_flush": (1, 1, 1, 1, 2),
    "geometry_index": (1, 4, 3, 1, 12),
}


def _findings(name: str, count: int, seed: int):
    proto, sim = get_protocol(name), get_backend("sim")
    rng = random.Random(seed)
    for _ in range(20_000):
        scn = codec.decode(rng.randbytes(96), name, "spec")
        if sim.run(scn, proto).violation is not None:
            yield scn
            count -= 1
            if not count:
                return


@pytest.mark.parametrize("name", list(PINNED))
def test_minimized_zoo_findings_keep_only_the_shape_the_bug_needs(name):
    proto = get_protocol(name)
    limit = PINNED[name]
    for scn in _findings(name, 6, seed=1):
        m = minimize(scn, proto)
        r = m.result
        tlps = sum(t.n for t in build(r, proto).tlps)
        shape = (r.payload.epochs, r.payload.num_tokens, r.topology.num_channels, r.topology.num_qps, tlps)
        assert m.complete and all(a <= b for a, b in zip(shape, limit)), (shape, limit, r.to_json(None))
