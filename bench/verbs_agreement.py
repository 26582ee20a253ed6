#!/usr/bin/env python3
"""The agreement table's verbs column, measured inside the soft-RoCE guest.

    epfuzz vm run -- python3 bench/verbs_agreement.py [R [PROTOCOL...]] | grep '^{' > bench/cuda/agreement-verbs.jsonl

One RDMA form of every protocol row of bench/cuda_agreement.py, run R times on the verbs backend, one
JSON line per protocol ({"protocol", "runs", "hits", "summary", "scenario"}). The shape is the sim
cells' (3 channels, a signal every 2 tokens, 6 tokens, 2 epochs) with the bytes the guest needs to
show a window (1 KiB per token) and the fault that makes an RDMA bug observable on rxe: two QPs, the
data of QP 0 delayed by netem (20 us, stretched x1000 to 20 ms under TCG, the guest tests' setting).
The `gpu` fields mean nothing to verbs and are left out; rxe has no PCIe, so relaxed ordering, PCI
atomic mode and o9-20 change nothing here (the table says so where a bug needs them). vm run returns
no output folder, so rows go to stdout, one line each, as they finish (a time cap keeps the rows done).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cuda_agreement import protocols  # noqa: E402
from epfuzz.backends import get_backend  # noqa: E402
from epfuzz.encoding import codec  # noqa: E402
from epfuzz.ir.scenario import Scenario  # noqa: E402
from epfuzz.protocols import get_protocol  # noqa: E402

#: the data QP's delay in ns (the backend stretches it x1000 under TCG: 20 ms)
DELAY_NS = 20000


def verbs_doc(name: str, num_qps: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"protocol": name, "payload": {"num_tokens": 6, "hidden_bytes": 1024, "epochs": 2},
                           "topology": {"num_channels": 3, "num_qps": num_qps}, "signal": {"interval": 2},
                           "faults": {"qp_delay_ns": [DELAY_NS]}}
    for path in get_protocol(name).fixed:  # pinned by the protocol: leave them to it
        section, field = path.split(".")
        doc.get(section, {}).pop(field, None)
    return doc


def verbs_scenario(name: str) -> tuple[Scenario, dict[str, Any]]:
    """Two QPs where the protocol allows them (a cross-QP window needs a second QP), else one."""
    try:
        doc = verbs_doc(name, 2)
        return codec.load_dict(doc), doc
    except Exception:  # noqa: BLE001 - the protocol pins one QP: the delayed data QP is then its only QP
        doc = verbs_doc(name, 1)
        return codec.load_dict(doc), doc


def main(repeats: int, only: list[str]) -> None:
    b = get_backend("verbs")
    for name in only or protocols():
        row: dict[str, Any] = {"protocol": name, "repeats": repeats}
        t = time.monotonic()
        try:
            scn, row["scenario"] = verbs_scenario(name)
            o = b.run(scn, get_protocol(name), repeats=repeats)
            row.update({"runs": o.runs, "hits": o.hits, "verdict": o.verdict, "summary": o.summary,
                        "kind": o.violation.kind if o.violation else None})
        except Exception as e:  # noqa: BLE001 - a row that cannot run says why
            row["note"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        row["seconds"] = round(time.monotonic() - t, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repeats", nargs="?", type=int, default=10, metavar="R", help="runs per protocol (default 10)")
    ap.add_argument("only", nargs="*", metavar="PROTOCOL", help="these rows only (default: every row)")
    a = ap.parse_args()
    main(a.repeats, a.only)
