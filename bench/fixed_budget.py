#!/usr/bin/env python3
"""Every fixed protocol through its harness for N executions (default 100,000), two at a time: no finding.

    python bench/fixed_budget.py [--runs N] [--jobs J] [NAME ...]    # writes bench/fixed_budget.md

Naming protocols runs only those and keeps the other rows already in the table, so
a long measurement can be finished in parts.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epfuzz.protocols import ZOO, deepep_paths, field2026, gpu2026  # noqa: E402
from epfuzz.protocols.deep import DEEP_ZOO  # noqa: E402
from epfuzz.protocols.deep2 import DEEP2_ZOO  # noqa: E402

FIXED = ([z[3] for z in ZOO] + ["write_imm_signal"] + [z[3] for z in DEEP_ZOO] + [z[3] for z in DEEP2_ZOO]
         + [p[2] for p in deepep_paths.PAIRS + field2026.PAIRS + gpu2026.PAIRS])


def one(name: str, runs: int) -> tuple[str, int, float, bool]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        work.mkdir()
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, str(ROOT / "harnesses" / f"{name}_fuzzer.py"), str(work),
                            str(ROOT / "corpus" / f"{name}_fuzzer"), f"-runs={runs}", "-seed=11",
                            f"-artifact_prefix={tmp}/", "-print_final_stats=1"], capture_output=True, text=True)
        m = re.search(r"stat::number_of_executed_units:\s+(\d+)", p.stderr)
        crashed = any(Path(tmp).glob("crash-*"))
        return name, int(m.group(1)) if m else 0, time.monotonic() - t0, crashed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("names", nargs="*", metavar="NAME", help="fixed protocols (default: all)")
    a = ap.parse_args()
    if unknown := sorted(set(a.names) - set(FIXED)):
        ap.error(f"not a fixed protocol: {', '.join(unknown)} (choose from {', '.join(FIXED)})")
    runs, names = a.runs, a.names or FIXED
    out = ROOT / "bench" / "fixed_budget.md"
    rows = [r for r in read(out, runs) if r[0] not in names] if a.names else []

    def record(n: str) -> None:
        rows.append(one(n, runs))
        print(rows[-1], flush=True)
        write(rows, runs, out)

    with ThreadPoolExecutor(a.jobs) as pool:
        list(pool.map(record, names))
    return 1 if any(c for *_, c in rows) else 0


def read(out: Path, runs: int) -> list[tuple[str, int, float, bool]]:
    """The rows of an earlier table made with the same number of executions."""
    text = out.read_text() if out.exists() else ""
    if f"{runs} executions each" not in text:
        return []
    rows = re.findall(r"^\| `(\w+)` \| (\d+) \| (\d+) \| (\w+) \|$", text, re.M)
    return [(n, int(e), float(s), c == "YES") for n, e, s, c in rows]


def write(rows: list[tuple[str, int, float, bool]], runs: int, out: Path) -> None:
    """Rewritten after every protocol, so a cut-off run still leaves its rows."""
    md = [f"Fixed protocols, {runs} executions each through the harness (seed corpus, -seed=11), "
          f"{time.strftime('%Y-%m-%d')}:", "", "| fixed protocol | executions | seconds | finding |",
          "| --- | --- | --- | --- |"]
    order = {n: i for i, n in enumerate(FIXED)}
    md += [f"| `{n}` | {e} | {s:.0f} | {'YES' if c else 'none'} |"
           for n, e, s, c in sorted(rows, key=lambda r: order.get(r[0], len(order)))]
    out.write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
