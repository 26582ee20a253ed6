#!/usr/bin/env python3
"""Soak: fuzz every fixed protocol with 2 jobs for a total wall time; no finding, no hang, flat RSS.

    python bench/soak.py [TOTAL_SECONDS]      # default 1800 (make soak)

For each fixed protocol, `epfuzz fuzz --jobs 2` for TOTAL/N seconds; RSS comes
from libFuzzer's status lines (progress.csv). "Flat" is judged by comparing the
mean RSS of the last quarter of each run with its second quarter. Writes
bench/soak.json and bench/soak.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epfuzz.cases.corpus import write_atomic  # noqa: E402
from epfuzz.protocols import ZOO  # noqa: E402

FIXED = [z[3] for z in ZOO] + ["write_imm_signal"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("total", nargs="?", type=int, default=1800, metavar="TOTAL_SECONDS",
                    help="wall time of the whole soak, shared among the fixed protocols (default 1800; "
                         "at least 20 s each)")
    total = ap.parse_args(argv).total
    if total <= 0:
        ap.error(f"TOTAL_SECONDS must be above zero, not {total}")
    each = max(20, total // len(FIXED))
    rows = []
    for name in FIXED:
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "run"
            t0 = time.monotonic()
            p = subprocess.run([sys.executable, "-m", "epfuzz", "--log-json", "fuzz", name, "--time", str(each),
                                "--jobs", "2", "--seed", "7", "--run-dir", str(run)],
                               capture_output=True, text=True, cwd=ROOT, timeout=each + 300)
            wall = time.monotonic() - t0
            with (run / "progress.csv").open() as f:
                series = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
            rss = [r["rss_mb"] for r in series if r["rss_mb"] > 0]
            q = max(1, len(rss) // 4)
            mid, end = rss[q:2 * q] or rss, rss[-q:] or rss
            last = series[-1] if series else {}
            rows.append({
                "protocol": name, "seconds": round(wall), "execs": int(last.get("execs", 0)),
                "exec_per_s": round(last.get("execs", 0) / wall) if wall else 0,
                "findings": len(list(run.glob("finding-*.json"))), "exit": p.returncode,
                "hung": wall > each + 120, "peak_rss_mb": max(rss, default=0),
                "rss_mid_mb": round(sum(mid) / len(mid)) if mid else 0,
                "rss_end_mb": round(sum(end) / len(end)) if end else 0,
            })
            print(rows[-1], flush=True)
    out = {"date": time.strftime("%Y-%m-%d"), "total_seconds": total, "jobs": 2, "rows": rows}
    write_atomic(ROOT / "bench" / "soak.json", (json.dumps(out, indent=2) + "\n").encode())
    md = [f"Soak {out['date']}: {total} s in all, 2 jobs, each fixed protocol for {each} s.", "",
          "| fixed protocol | execs | exec/s | findings | hung | RSS MB (2nd quarter -> last quarter, peak) |",
          "| --- | --- | --- | --- | --- | --- |"]
    md += [f"| `{r['protocol']}` | {r['execs']} | {r['exec_per_s']} | {r['findings']} | {r['hung']} | "
           f"{r['rss_mid_mb']} -> {r['rss_end_mb']}, {r['peak_rss_mb']:.0f} |" for r in rows]
    write_atomic(ROOT / "bench" / "soak.md", ("\n".join(md) + "\n").encode())
    print("\n".join(md))
    bad = [r for r in rows if r["findings"] or r["hung"] or r["exit"] not in (0,)]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
