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
    assert _row(table, "inband_tag")[-1].startswith("n/a: no (n/a")  # a refusal is said as the backend's n/a
    assert _row(table, "geometry_index")[-1] == "- |"
    assert "pending" not in agreement.cmd_table(sim, [])


def test_every_protocol_of_the_table_has_every_cell():
    """The committed rows: a protocol the table lists (every family but the deep sets) has a sim row, a cuda
    cell (measured, or the backend's refusal, or "not run") and a verbs cell. A new pair gets them all with
    `python bench/cuda_agreement.py add NAME...`."""
    bench = ROOT / "bench" / "cuda"
    table = agreement.cmd_table(bench / "agreement-sim.jsonl",
                                [bench / "agreement-cuda.jsonl", bench / "agreement-cuda-plan.jsonl"],
                                bench / "agreement-verbs.jsonl")
    missing = [name for name in agreement.protocols() if " - |" in " | ".join(_row(table, name)) + " "]
    assert not missing, f"rows lacking cells: {missing}; run python bench/cuda_agreement.py add {' '.join(missing)}"
    names = set(agreement.protocols())
    assert {"read_flush_unfenced", "ce_batch_signal_fixed", "tma_flag", "deepep_combine"} <= names
    assert not any(n.startswith(("deep_", "deep2_")) for n in names) and "dispatch_any" not in names


def test_the_cuda_plan_is_the_backends_own_refusal_or_not_run(tmp_path):
    out = tmp_path / "plan.jsonl"
    agreement.cmd_plan(out, ["read_flush_unfenced", "deepep_combine"])
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 8 and all(r["planned"] for r in rows)
    read = {r["note"] for r in rows if r["protocol"] == "read_flush_unfenced"}
    assert len(read) == 1 and read.pop().startswith("n/a: cuda: an RDMA READ has no GPU form")
    assert {r["note"] for r in rows if r["protocol"] == "deepep_combine"} == {agreement.NOT_RUN}
    agreement.cmd_plan(out, ["read_flush_unfenced"])  # rows already there are kept, not repeated
    assert len(out.read_text().splitlines()) == 8
    sim = tmp_path / "sim.jsonl"
    sim.write_text(json.dumps({"protocol": "read_flush_unfenced", "expect": "finding"}) + "\n"
                   + json.dumps({"protocol": "ro_only_strict_mr", "expect": "finding",
                                 "mlx5-ro-only": "finding (stale-accept)"}) + "\n")
    measured = tmp_path / "cuda.jsonl"  # a measured row wins over the plan's note
    measured.write_text(json.dumps({"protocol": "deepep_combine", "form": "weak", "stress": 0, "runs": 10,
                                    "hits": 1}) + "\n")
    table = agreement.cmd_table(sim, [measured, out])
    cells = _row(table, "read_flush_unfenced")
    assert cells[3].startswith("n/a: cuda: an RDMA READ") and cells[4] == cells[7] == "n/a (same reason)"
    cells = _row(table, "deepep_combine")
    assert cells[3] == "1 of 10 (10,000.0)" and cells[4] == agreement.NOT_RUN
    assert "| ro_only_strict_mr | mlx5-ro-only | finding (stale-accept) |" in table  # its home preset's verdict


def test_add_gives_a_new_row_every_cell_in_one_command(tmp_path, monkeypatch, capsys):
    """`add NAME` on a protocol without rows: the sim row, the cuda backend's answer, the verbs refusal (asked on
    the host, no guest booted for a protocol verbs refuses), and agreement.md rewritten under its header."""
    for key in ("SIM", "CUDA", "PLAN", "VERBS"):
        monkeypatch.setattr(agreement, key, tmp_path / f"{key.lower()}.jsonl")
    monkeypatch.setattr(agreement, "BENCH", tmp_path)
    agreement.CUDA.write_text("")
    (tmp_path / "agreement.md").write_text("# header kept\n\n| protocol | old |\n| --- | --- |\n")
    monkeypatch.setattr(agreement, "protocols", lambda order="table": ["ce_batch_signal_fixed"])
    agreement.BUDGET.update(agreement.ADD_BUDGET)
    agreement.cmd_add(["ce_batch_signal_fixed"], 1, guest=False)
    md = (tmp_path / "agreement.md").read_text()
    assert md.startswith("# header kept\n\n| protocol |") and "| old |" not in md
    cells = _row(md, "ce_batch_signal_fixed")
    assert cells[1:3] == ["clean", "safe"] and cells[3].startswith("n/a: cuda: copy-engine batches")
    assert cells[-1].startswith("n/a: backend verbs: ce_batch_signal_fixed posts copy-engine copies")
    sim = json.loads(agreement.SIM.read_text())
    assert sim["budget"] == agreement.ADD_BUDGET and sim["spec"] == "safe"
    agreement.cmd_add(["ce_batch_signal_fixed"], 1, guest=False)  # rows already there are kept
    assert len(agreement.SIM.read_text().splitlines()) == len(agreement.VERBS.read_text().splitlines()) == 1
    agreement.PLAN.write_text(agreement.PLAN.read_text().replace("copy-engine batches", "stale words"))
    agreement.cmd_add(["ce_batch_signal_fixed"], 1, guest=False, redo=True)  # made again, not appended
    assert len(agreement.SIM.read_text().splitlines()) == len(agreement.VERBS.read_text().splitlines()) == 1
    assert len(agreement.PLAN.read_text().splitlines()) == 4 and "stale words" not in agreement.PLAN.read_text()
