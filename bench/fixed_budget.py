#!/usr/bin/env python3
"""Every fixed protocol through its harness for N executions (default 100,000), two at a time: no finding.

    python bench/fixed_budget.py [--runs N] [--jobs J] [--out F.md] [NAME ...]  # writes bench/fixed_budget.md

Naming protocols runs only those and keeps the other rows already in the table, so
a long measurement can be finished in parts; each row says the date and the machine it was
measured on, since the parts of one table are measured on different days and hosts (the
seconds column depends on the host, the verdict does not). `--out` writes another table (a
short local check at `--runs 10000` must not replace the 100,000-execution one).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epfuzz.cases.corpus import write_atomic  # noqa: E402
from epfuzz.protocols import ZOO, cebatch, deepep_paths, field2026, gpu2026, pull, rxcache  # noqa: E402
from epfuzz.protocols.deep import DEEP_ZOO  # noqa: E402
from epfuzz.protocols.deep2 import DEEP2_ZOO  # noqa: E402

FIXED = ([z[3] for z in ZOO] + ["write_imm_signal"] + [z[3] for z in DEEP_ZOO] + [z[3] for z in DEEP2_ZOO]
         + [p[2] for p in deepep_paths.PAIRS + field2026.PAIRS + pull.PAIRS + cebatch.PAIRS + gpu2026.PAIRS
            + rxcache.PAIRS])


Row = tuple[str, int, float, bool, str, str]   # name, executions, seconds, finding, date, machine
MACHINE = f"{platform.machine()} python {platform.python_version()}, {os.cpu_count()} cores"


def one(name: str, runs: int) -> Row:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        work.mkdir()
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, str(ROOT / "harnesses" / f"{name}_fuzzer.py"), str(work),
                            str(ROOT / "corpus" / f"{name}_fuzzer"), f"-runs={runs}", "-seed=11",
                            f"-artifact_prefix={tmp}/", "-print_final_stats=1"], capture_output=True, text=True)
        m = re.search(r"stat::number_of_executed_units:\s+(\d+)", p.stderr)
        crashed = any(Path(tmp).glob("crash-*"))
        return (name, int(m.group(1)) if m else 0, time.monotonic() - t0, crashed, time.strftime("%Y-%m-%d"),
                MACHINE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000, help="executions per protocol")
    ap.add_argument("--jobs", type=int, default=2, help="protocols at a time")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "fixed_budget.md",
                    help="the table (default bench/fixed_budget.md; another file for a short local check)")
    ap.add_argument("names", nargs="*", metavar="NAME", help="fixed protocols (default: all)")
    a = ap.parse_args()
    if unknown := sorted(set(a.names) - set(FIXED)):
        ap.error(f"not a fixed protocol: {', '.join(unknown)} (choose from {', '.join(FIXED)})")
    runs, names = a.runs, a.names or FIXED
    out = a.out
    rows = [r for r in read(out, runs) if r[0] not in names] if a.names else []
    lock = threading.Lock()  # two jobs may end at once: one writes the table at a time, with both rows

    def record(n: str) -> None:
        row = one(n, runs)
        with lock:
            rows.append(row)
            print(row, flush=True)
            write(rows, runs, out)

    with ThreadPoolExecutor(a.jobs) as pool:
        list(pool.map(record, names))
    return 1 if any(r[3] for r in rows) else 0


def read(out: Path, runs: int) -> list[Row]:
    """The rows of an earlier table made with the same number of executions."""
    text = out.read_text() if out.exists() else ""
    if f"{runs} executions each" not in text:
        return []
    rows = re.findall(r"^\| `(\w+)` \| (\d+) \| (\d+) \| (\w+) \| ([\d-]+) \| ([^|]+?) \|$", text, re.M)
    return [(n, int(e), float(s), c == "YES", d, m) for n, e, s, c, d, m in rows]


def write(rows: list[Row], runs: int, out: Path) -> None:
    """Rewritten (atomically) after every protocol, so a cut-off run still leaves its rows."""
    md = [f"Fixed protocols, {runs} executions each through the harness (seed corpus, -seed=11); each row's "
          "date and machine:", "", "| fixed protocol | executions | seconds | finding | date | machine |",
          "| --- | --- | --- | --- | --- | --- |"]
    order = {n: i for i, n in enumerate(FIXED)}
    md += [f"| `{n}` | {e} | {s:.0f} | {'YES' if c else 'none'} | {d} | {m} |"
           for n, e, s, c, d, m in sorted(rows, key=lambda r: order.get(r[0], len(order)))]
    write_atomic(out, ("\n".join(md) + "\n").encode())


if __name__ == "__main__":
    raise SystemExit(main())
