"""The monitor counts what each move and feedback did, and writes progress rows epfuzz report reads."""

from __future__ import annotations

from epfuzz.campaign.common import PROGRESS_HEADER
from epfuzz.protocols import get_protocol
from epfuzz.search.engines.guided import Guided


def test_stats_count_moves_and_feedbacks_and_rows_have_the_progress_columns():
    g = Guided("deep_gdr", get_protocol("deep_gdr"), 1)
    for _ in range(60):
        g.step()
    st = g.monitor.stats()
    assert st["execs"] == 60 == sum(m["used"] for m in st["moves"].values())
    assert sum(m["kept"] for m in st["moves"].values()) == len(g.corpus)
    assert set(st["feedbacks"]) <= {"reorder", "reads", "shape"} and st["feedbacks"]
    assert sum(st["feedbacks"].values()) == len(g.corpus.seen)
    assert len(g.monitor.row(2.0, 60).split(",")) == len(PROGRESS_HEADER.split(","))
