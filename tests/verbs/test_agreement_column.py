"""The agreement table's verbs column: read from the guest's rows, not a placeholder.

Host-side only (rendering); the rows themselves come from bench/verbs_agreement.py in the guest.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("cuda_agreement", ROOT / "bench" / "cuda_agreement.py")
agreement = importlib.util.module_from_spec(spec)
spec.loader.exec_module(agreement)


def _row(table: str, name: str) -> list[str]:
    return next(line.split(" | ") for line in table.splitlines() if line.startswith(f"| {name} |"))


def test_the_verbs_column_shows_k_of_r_and_why_rxe_cannot_show_a_bug(tmp_path):
    sim = tmp_path / "sim.jsonl"
    sim.write_text(json.dumps({"protocol": "shared_counter", "expect": "finding"}) + "\n")
    verbs = tmp_path / "verbs.jsonl"
    verbs.write_text("\n".join(json.dumps(r) for r in (
        {"protocol": "shared_counter", "runs": 10, "hits": 7},
        {"protocol": "flag_write_signal", "runs": 10, "hits": 0},
        {"protocol": "inband_tag", "note": "Unsupported: no"})) + "\n")
    table = agreement.cmd_table(sim, [], verbs)
    assert _row(table, "shared_counter")[-1] == "7 of 10 |"
    assert _row(table, "flag_write_signal")[-1].startswith("0 of 10 (n/a: rxe has no PCIe")
    assert _row(table, "inband_tag")[-1].startswith("Unsupported: no (n/a")
    assert _row(table, "geometry_index")[-1] == "- |"
    assert "pending" not in agreement.cmd_table(sim, [])
